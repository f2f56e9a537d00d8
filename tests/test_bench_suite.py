"""``ondevice-rl bench --suite gpu`` at small sizes on CPU: one bench.json,
bench.png and table with the environment, env stepping, every asked-for
learner at each seed count beside its reference, the scaling curve, and
rows that say why a population was skipped (the memory rule) or a reference
failed. No timing assertions."""

import json

import jax
import pytest

from ondevice_rl.train.bench import env_speed, gpu_suite, train_speed
from ondevice_rl.train.cli import main
from ondevice_rl.train.services.memory import estimate_member_bytes

#: A reference script: the flags it got, the precision its JAX would use;
#: it fails at 2 seeds.
FAKE_REFERENCE = """
import json, os, sys
seeds, timesteps = int(sys.argv[2]), int(sys.argv[4])
if seeds == 2:
    sys.exit("reference out of memory")
print(json.dumps(dict(seeds=seeds, timesteps=timesteps, compile_s=1.0, run_s=2.0,
    sps=1000, final_return=4.0,
    precision=os.environ.get("JAX_DEFAULT_MATMUL_PRECISION"),
    preallocate=os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE"))))
"""


def _suite(tmp_path, *flags):
    references = tmp_path / "references"
    references.mkdir()
    (references / "reference_ppo.py").write_text(FAKE_REFERENCE)
    out = tmp_path / "out"
    argv = ["bench", "--suite", "gpu", "--envs", "CartPole-v1", "--batch-sizes", "4"]
    argv += ["--references", str(references), "--out", str(out), "--json", *flags]
    assert main(argv) == 0
    return json.loads((out / "bench.json").read_text()), out


def test_gpu_suite_small(tmp_path, capsys, monkeypatch):
    steps = 1024
    one = estimate_member_bytes(train_speed.bench_config(steps, algo="ppo"))
    # A device that holds two members: the population of 4 is skipped.
    monkeypatch.setattr(gpu_suite, "device_budget", lambda: 2 * one + 1)
    monkeypatch.delenv("XLA_PYTHON_CLIENT_PREALLOCATE", raising=False)
    monkeypatch.setattr(env_speed, "REPEATS", 1)  # one timed scan per env row
    data, out = _suite(
        tmp_path, "--algos", "ppo", "--seeds", "1,2,4", "--timesteps", str(steps),
        "--matmul-precision", "high",
    )  # fmt: skip
    stdout = capsys.readouterr().out
    assert "bench --suite gpu" in stdout and "device: cpu" in stdout
    assert json.loads(stdout.strip().splitlines()[-1]) == data
    assert (out / "bench.png").stat().st_size > 0

    meta = data["meta"]
    assert meta["suite"] == "gpu" and meta["platform"] == "cpu"
    assert meta["libraries"]["jax"] == jax.__version__
    assert meta["matmul_precision"] == "high" and "jaxlib" in meta["jax_environment"]
    [env_row] = data["env"]["results"]
    assert (env_row["env"], env_row["batch"]) == ("CartPole-v1", 4)
    assert env_row["sps"] > 0

    first, second, skipped = data["train"]["ppo"]
    assert [r["seeds"] for r in (first, second, skipped)] == [1, 2, 4]
    for row in (first, second):
        assert row["sps"] > 0 and row["compile_s"] > 0
        assert row["matmul_precision"] == "high" and row["host_ops"] == []
        assert row["timesteps"] == row["seeds"] * steps
    assert first["reference"]["sps"] == 1000 and first["reference"]["seeds"] == 1
    assert first["reference"]["precision"] == "high"
    # Beside our process's preallocated pool, the reference allocates as it goes.
    assert first["reference"]["preallocate"] == "false"
    assert first["ratio"]["sps"] == pytest.approx(first["sps"] / 1000, rel=1e-2)
    assert "reference" not in second and "out of memory" in second["reference_failed"]
    assert "sps" not in skipped and "GiB free" in skipped["skipped"]
    assert skipped["estimated_bytes"] == 4 * one

    curve = data["scaling"]["ppo"]
    assert [p["seeds"] for p in curve] == [1, 2]
    assert curve[0]["efficiency"] == 1.0
    assert curve[1]["efficiency"] == pytest.approx(second["sps"] / (2 * first["sps"]))


def test_gpu_suite_cut_short_keeps_every_measured_row(tmp_path, monkeypatch):
    def bench_seeds(seeds, *args):
        if seeds == 16:
            raise KeyboardInterrupt  # the user's Ctrl-C, or a time limit
        return dict(seeds=seeds, sps=100.0 * seeds, compile_s=1.0)

    monkeypatch.setattr(train_speed, "bench_seeds", bench_seeds)
    monkeypatch.setattr(gpu_suite, "estimate_member_bytes", lambda config: 1)
    with pytest.raises(KeyboardInterrupt):
        gpu_suite.run_gpu_suite(
            dict(meta={}), tmp_path, envs=("CartPole-v1",), batches=(4,),
            learners=("ppo",), seed_counts=(1, 4, 16), log=lambda line: None,
        )  # fmt: skip
    data = json.loads((tmp_path / "bench.json").read_text())
    assert [r["sps"] for r in data["train"]["ppo"]] == [100.0, 400.0]
    assert [p["efficiency"] for p in data["scaling"]["ppo"]] == [1.0, 1.0]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--algos", "ppo,nosuch"], "--algos: unknown learner(s) nosuch"),
        (["--references", "/no/such/dir"], "--references: no such directory"),
        (["--envs", "NoSuchEnv-v0"], "--envs: unknown environment(s) NoSuchEnv-v0"),
        (["--algos", "dqn", "--timesteps", "1"], "--timesteps"),
    ],
)
def test_gpu_suite_bad_input_is_one_line(flags, message, tmp_path, capsys):
    argv = ["bench", "--suite", "gpu", "--out", str(tmp_path), *flags]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


@pytest.mark.slow
def test_gpu_suite_quick_runs_every_learner(tmp_path):
    data, _ = _suite(tmp_path, "--quick", "--seeds", "1,2")
    assert set(data["train"]) == set(gpu_suite.algorithms())
    for name, rows in data["train"].items():
        assert [r["seeds"] for r in rows] == [1, 2], name
        assert all(r["sps"] > 0 for r in rows), name
        config = train_speed.bench_config(gpu_suite.QUICK_TIMESTEPS[name], algo=name)
        assert rows[0]["timesteps"] == config.num_updates * config.steps_per_update
