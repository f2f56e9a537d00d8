"""``--wandb PROJECT``: the run's config and rows reach Weights & Biases,
read back from the offline run's own records (``WANDB_MODE=offline``)."""

import importlib.util
import json
import struct

import numpy as np
import pytest
from test_run_entry import RUN  # 24 updates of 2 x 8 steps, in 12 segments

import ondevice_rl

pytestmark = [
    pytest.mark.slow,  # W&B's service starts in a few seconds
    # Found, not imported: every pytest worker collects this module.
    pytest.mark.skipif(importlib.util.find_spec("wandb") is None, reason="needs wandb"),
]

BLOCK, HEADER = 32768, 7  # a .wandb file: LevelDB's log format of protobufs


def _records(path):
    """The ``Record`` protobufs of an offline run's ``.wandb`` file."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    records, pending, offset = [], b"", HEADER
    while offset + HEADER <= len(data):
        left = BLOCK - offset % BLOCK
        if left < HEADER:  # the block's tail is padding
            offset += left
            continue
        _, length, kind = struct.unpack_from("<IHB", data, offset)
        pending += data[offset + HEADER : offset + HEADER + length]
        offset += HEADER + length
        if kind in (1, 4):  # FULL, LAST
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
    return records


def _key(item) -> str:
    return item.key or "/".join(item.nested_key)


def _read_back(run_dir):
    config, rows, summary = {}, [], {}
    for record in _records(next(run_dir.glob("run-*.wandb"))):
        kind = record.WhichOneof("record_type")
        items = []
        if kind == "run":
            items = record.run.config.update
        elif kind == "config":
            items = record.config.update
        for item in items:
            config[_key(item)] = json.loads(item.value_json)
        if kind == "history":
            rows.append(
                {_key(i): json.loads(i.value_json) for i in record.history.item}
            )
        if kind == "summary":
            for item in record.summary.update:
                summary[_key(item)] = json.loads(item.value_json)
    return config, rows, summary


def test_the_runs_config_and_rows_reach_wandb(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.chdir(tmp_path)
    run = dict(RUN, log_every=4, progress=False, wandb="ondevice-rl-test")
    result = ondevice_rl.run_training(**run)
    stored = json.loads((result.out_dir / "config.json").read_text())["wandb"]
    assert stored["project"] == "ondevice-rl-test"
    (run_dir,) = (tmp_path / "wandb").glob(f"offline-run-*-{stored['id']}")
    config, rows, summary = _read_back(run_dir)

    assert config["algo"] == "ppo" and config["seed"] == 1 and config["log_every"] == 4
    assert config["config"]["num_envs"] == 2
    assert config["hyperparams"]["learning_rate"] == pytest.approx(2.5e-4)
    logged = [r for r in rows if "update" in r]
    assert [r["update"] for r in logged] == result.updates.tolist()
    assert [r["env_steps"] for r in logged] == (result.updates * 16).tolist()
    np.testing.assert_allclose(
        [r["losses/total_loss"] for r in logged], result.metrics["total_loss"]
    )
    finished = np.isfinite(result.metrics["episode_return"])
    np.testing.assert_allclose(
        [r["charts/episode_return"] for r in logged if "charts/episode_return" in r],
        result.metrics["episode_return"][finished],
    )
    assert summary["status"] == "finished"
    assert summary["final_return"] == pytest.approx(result.final_return)
