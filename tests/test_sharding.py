"""Several devices and hosts, on CPU, in subprocesses.

The device count is fixed when a JAX backend starts, so each check runs
``tests/sharding_worker.py`` in a fresh process with
``--xla_force_host_platform_device_count`` (and the CPU scheduler flag that
avoids jaxlib's deadlock, see ``ondevice_rl/cpu/flags.py``). The multi-host check
starts two processes that meet on a loopback coordinator (gloo collectives).
"""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from suite_flags import suite_compile_flags

from ondevice_rl.devices import distributed

# Its module-scoped programs are built once: its tests share one xdist worker.
pytestmark = pytest.mark.xdist_group("sharding")

WORKER = Path(__file__).with_name("sharding_worker.py")
SCHEDULER_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler=false"
TIMEOUT_S = 300


def _env(devices: int) -> dict:
    env = dict(os.environ)
    env["JAX_PLATFORMS"] = "cpu"
    env["XLA_FLAGS"] = (
        f"--xla_force_host_platform_device_count={devices} {SCHEDULER_FLAG}"
        f" {suite_compile_flags()}"
    )
    for name in (
        distributed.ENV_COORDINATOR,
        distributed.ENV_NUM_PROCESSES,
        distributed.ENV_PROCESS_ID,
    ):
        env.pop(name, None)
    return env


def _check(proc: subprocess.CompletedProcess | subprocess.Popen, output: str):
    assert proc.returncode == 0, f"worker failed ({proc.returncode}):\n{output}"


def _run_worker(mode: str, out: Path, devices: int) -> dict:
    """Runs ``sharding_worker.py MODE OUT`` in one process; returns its arrays."""
    proc = subprocess.run(
        [sys.executable, str(WORKER), mode, str(out)],
        env=_env(devices),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    _check(proc, proc.stdout + proc.stderr)
    with np.load(out) as data:
        return dict(data)


@pytest.fixture(scope="module")
def single(tmp_path_factory) -> dict:
    """One process, 4 CPU devices: every single-process check's arrays, the
    CLI's data-parallel run and refusals included (one process start)."""
    return _run_worker("single", tmp_path_factory.mktemp("single") / "single.npz", 4)


def _tagged(data: dict, tag: str) -> dict:
    return {k.split("/", 1)[1]: v for k, v in data.items() if k.startswith(tag + "/")}


def _assert_close(a: dict, b: dict, atol=1e-5):
    assert a.keys() == b.keys() and a
    for key in a:
        np.testing.assert_allclose(a[key], b[key], rtol=1e-5, atol=atol, err_msg=key)


def test_population_sharded_over_4_devices_matches_1_device(single):
    assert single["device_count"] == 4
    pop1 = _tagged(single, "pop1")
    assert len(pop1) == 6 * 9  # 6 members (padded to 8 on 4 devices) x metrics
    _assert_close(_tagged(single, "pop4"), pop1)
    _assert_close(_tagged(single, "pop2"), pop1)
    # Two devices running one program 4 times: no deadlock (the process
    # ended), the same bits each time, one compile.
    pop2 = _tagged(single, "pop2")
    for i in range(1, 4):
        again = _tagged(single, f"pop2-again{i}")
        assert again.keys() == pop2.keys()
        for key in pop2:
            np.testing.assert_array_equal(again[key], pop2[key], err_msg=key)
    assert single["compiles/pop2"] == 1


def test_data_parallel_step_averages_gradients(single):
    # One learn step over 2 devices == per-shard gradients averaged by hand.
    assert single["grad/shard_difference"] > 1e-3  # shards' gradients differ
    assert single["grad/update_size"] > 1e-5
    assert single["grad/max_abs_err"] < 1e-6


def test_data_parallel_keeps_params_replicated_and_one_device_is_plain_ppo(single):
    for tag in ("dp1", "dp2"):
        flags = [v for k, v in _tagged(single, tag).items() if "replicated" in k]
        assert flags and all(flags), tag
    # Over one device the data-parallel program is make_train's, number for number.
    _assert_close(_tagged(single, "dp1"), _tagged(single, "ref"), atol=1e-6)
    dp2 = _tagged(single, "dp2")
    for name in ("episode_return", "total_loss", "entropy"):
        assert np.all(np.isfinite(dp2[name])), name


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # ~17 s: two processes compiling both programs. The default
# suite checks the same programs over 2 devices in one process (above) and the
# runtime's configuration (below); this adds the gloo collectives across hosts.
def test_two_processes_match_one_process_with_two_devices(single, tmp_path):
    port, out = _free_port(), tmp_path / "multihost.npz"
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), "multihost", str(out), str(port), "2",
             str(i)],
            env=_env(1),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]  # fmt: skip
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=TIMEOUT_S)[0])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for proc, output in zip(procs, outputs, strict=True):
        _check(proc, output)
    with np.load(out) as data:
        multi = dict(data)
    assert multi["process_count"] == 2 and multi["device_count"] == 2
    # Every process agreed on one chunk (the smallest memory budget).
    assert multi["chunks/pop2"] == single["chunks/pop2"] == 6
    _assert_close(_tagged(multi, "pop2"), _tagged(single, "pop2"))
    _assert_close(_tagged(multi, "dp2"), _tagged(single, "dp2"))


@pytest.mark.slow
def test_data_parallel_over_two_devices_learns_cartpole(tmp_path):
    # About 10 s alone; slow only to keep the default suite's budget. The fast
    # checks above cover the update's arithmetic.
    returns = _run_worker("dp-learn", tmp_path / "learn.npz", 2)["learn/episode_return"]
    assert returns[-10:].mean() > 100.0
    assert returns[-10:].mean() > returns[:10].mean() + 50.0


# --- ondevice-rl train --devices: one run over the 4 simulated devices -----------


@pytest.fixture(scope="module")
def dp_segments(tmp_path_factory) -> dict:
    """One process, 2 CPU devices: data-parallel runs from Python, segmented,
    one-shot, stopped and resumed."""
    out = tmp_path_factory.mktemp("dp-segments") / "dp-segments.npz"
    return _run_worker("dp-segments", out, 2)


def test_train_devices_writes_a_run_directory_and_eval_reads_it(single):
    assert single["cli/status"] == 0, single["cli/stderr"]
    files = str(single["cli/files"]).split()
    for name in ("config.json", "metrics.jsonl", "curve.png", "checkpoint"):
        assert name in files, files
    info = json.loads(str(single["cli/config"]))
    assert info["devices"] == 4 and info["status"] == "finished"  # --devices all
    assert info["updates"] == 4
    rows = [json.loads(line) for line in str(single["cli/metrics"]).splitlines()]
    assert [r["update"] for r in rows] == [1, 2, 3, 4]
    evaluated = [r["update"] for r in rows if r["eval_return"] is not None]
    assert evaluated == [2, 4]  # --eval-every 2, inside the program
    assert single["eval/status"] == 0, single["eval/stderr"]  # a policy as any


# The segmented and resumed runs' paths are the single-device runner's
# (tests/test_runner.py, tests/test_resume.py), the data-parallel program's
# numbers are checked above, and the CLI's run above is segmented: the two
# checks of their equality over 2 devices (10 s of a process) under slow.
@pytest.mark.slow
def test_segmented_data_parallel_run_equals_the_one_shot_program(dp_segments):
    seg, whole = _tagged(dp_segments, "seg"), _tagged(dp_segments, "whole")
    assert seg.keys() == whole.keys() and len(seg["total_loss"]) == 4
    ended = whole["episodes"] > 0  # a row's episode stats: null where none ended
    for name in seg:  # rows of one update each: the per-update metrics
        expected = whole[name]
        if name in ("episode_return", "episode_length"):
            expected = np.where(ended, expected, np.nan)
        np.testing.assert_array_equal(seg[name], expected, err_msg=name)


@pytest.mark.slow
def test_data_parallel_run_stopped_and_resumed_equals_the_straight_one(dp_segments):
    assert dp_segments["stopped/updates"] == 2
    resumed = _tagged(dp_segments, "resumed")
    straight = _tagged(dp_segments, "straight")
    assert resumed.keys() == straight.keys() and len(resumed["total_loss"]) == 4
    for name in resumed:
        np.testing.assert_array_equal(resumed[name], straight[name], err_msg=name)


def test_what_data_parallel_cannot_do_is_one_line_before_compiling(single):
    expected = [
        "--devices 2: num_envs=3 is not divisible by 2 devices",
        "--devices 2: per-device batch 16 is not divisible by num_minibatches=32",
        "--devices 2: data-parallel PPO does not normalise obs or rewards",
        "--devices 5: only 4 devices here (on CPU, XLA_FLAGS="
        "--xla_force_host_platform_device_count=5 simulates more)",
    ]
    for i, message in enumerate(expected):
        err = str(single[f"refused/{i}/stderr"])
        assert single[f"refused/{i}/status"] == 2, err
        assert err == f"ondevice-rl train: error: {message}\n", err
        assert single[f"refused/{i}/compiles"] == 0
        assert not single[f"refused/{i}/made"]  # nothing written


# --- configuration of the multi-controller runtime (no subprocess) ---------------


def test_distributed_config_from_flags_and_env():
    assert distributed.config_from_env(environ={}) is None
    env = {
        distributed.ENV_COORDINATOR: "10.0.0.1:1234",
        distributed.ENV_NUM_PROCESSES: "4",
        distributed.ENV_PROCESS_ID: "3",
    }
    assert distributed.config_from_env(environ=env) == distributed.DistributedConfig(
        "10.0.0.1:1234", 4, 3
    )
    # Flags win over the environment.
    config = distributed.config_from_env("host:99", 2, 0, environ=env)
    assert config == distributed.DistributedConfig("host:99", 2, 0)
    auto = distributed.config_from_env(environ={distributed.ENV_COORDINATOR: "auto"})
    assert auto.coordinator == "auto"


@pytest.mark.parametrize(
    "args, message",
    [
        (("h:1", None, 0), "missing --num-processes"),
        (("h:1", 2, None), "missing --process-id"),
        ((None, 2, 0), "missing --coordinator"),
        (("nohost", 2, 0), "host:port"),
        (("h:1", 2, 2), "process_id must be in 0..1"),
        (("h:1", "two", 0), "must be an integer"),
    ],
)
def test_distributed_config_errors(args, message):
    with pytest.raises(ValueError, match=message):
        distributed.config_from_env(*args, environ={})
