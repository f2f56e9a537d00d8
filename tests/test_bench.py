"""``ondevice-rl bench``: end to end at quick sizes (no timing assertions)."""

import json
import os

import jax
import jax.numpy as jnp
import pytest

from ondevice_rl.train.bench import env_speed, host, train_speed
from ondevice_rl.train.bench.report import train_table
from ondevice_rl.train.bench.transfers import TransferCounter, host_ops
from ondevice_rl.train.cli import main


@pytest.mark.slow  # ~10 s of compiles; its parts run in the default suite:
# bench env and bench train measured for real by test_bench_suite.py's
# test_gpu_suite_small, bench host through the CLI by test_bench_host.py's
# test_cli_table_json_and_plot, the bench command's flags by test_cli_fuzz.py.
def test_bench_quick_end_to_end(tmp_path, capsys, monkeypatch):
    # The quick path at smaller quick sizes (one env batch timed once, two
    # PPO updates for train and host): the same parts, rows and checks, fewer
    # compiles and shorter runs.
    monkeypatch.setattr(env_speed, "QUICK_BATCHES", (1024,))
    monkeypatch.setattr(env_speed, "REPEATS", 1)
    monkeypatch.setattr(train_speed, "QUICK_TIMESTEPS", 1024)
    monkeypatch.setattr(host, "QUICK_TIMESTEPS", 1024)
    argv = ["bench", "--quick", "--seeds", "1", "--json", "--out", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "bench env" in out and "bench train" in out and "bench host" in out
    data = json.loads((tmp_path / "bench.json").read_text())
    assert json.loads(out.strip().splitlines()[-1])["train"] == data["train"]
    assert (tmp_path / "bench.png").stat().st_size > 0
    assert data["meta"]["quick"] is True

    env_rows = data["env"]["results"]
    assert {r["env"] for r in env_rows} >= {"CartPole-v1", "gymnax/CartPole-v1"}
    assert all(r["sps"] > 0 for r in env_rows)
    train = data["train"]
    for field in train_speed.REQUIRED:
        assert field in train, field
    assert train["algo"] == "ppo" and train["seeds"] == 1
    assert train["compile_options"] == {}  # one member: XLA's scheduler as set
    assert train["timesteps"] == train_speed.QUICK_TIMESTEPS
    assert train["sps"] > 0 and train["compile_s"] > 0
    # Matmul FLOPs over run time, and that rate over the device's peak.
    assert train["matmul_gflops"] > 0 and train["matmul_peak_gflops"] > 0
    peak = train["matmul_peak_gflops"] * train["devices"]
    fraction = train["matmul_gflops"] / peak
    assert train["results"][0]["peak_fraction"] == pytest.approx(fraction, abs=1e-3)
    assert data["meta"]["processor"]

    rows = {r["backend"]: r for r in data["host"]["results"][0]["rows"]}
    assert rows["gym-sync"]["sps"] > 0 and rows["fused"]["sps"] > 0
    quick = host.QUICK_TIMESTEPS
    assert rows["gym-sync"]["timesteps"] == rows["fused"]["timesteps"] == quick
    # The host loop moves data every step; the fused program never does.
    assert rows["gym-sync"]["transfers_per_update"] >= 2 * 128
    assert rows["fused"]["transfers_per_update"] == 0
    assert rows["fused"]["host_ops"] == []
    assert rows["fused"]["one_off_transfers"] == 2


def test_bench_env_interrupted_keeps_every_measured_row(tmp_path, monkeypatch):
    from ondevice_rl.train.bench import env_speed

    def bench_ours(name, batch, steps):
        if batch == 8:
            raise KeyboardInterrupt  # Ctrl-C, or a time limit's SIGINT
        return dict(env=name, impl="ondevice_rl", batch=batch, sps=1e6)

    monkeypatch.setattr(env_speed, "bench_ours", bench_ours)
    argv = ["bench", "env", "--envs", "CartPole-v1", "--batch-sizes", "4,8"]
    assert main([*argv, "--no-compare", "--out", str(tmp_path)]) == 130
    data = json.loads((tmp_path / "bench.json").read_text())
    assert [(r["batch"], r["sps"]) for r in data["env"]["results"]] == [(4, 1e6)]


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "train", "--seeds", "0"],
        ["bench", "train", "--timesteps", "100"],
        ["bench", "train", "--algo", "nosuch"],
        ["bench", "train", "--reference", "/no/such/reference.py"],
        ["bench", "env", "--envs", "NoSuchEnv-v0"],
    ],
)
def test_bad_input_exits_2(argv, tmp_path, capsys):
    try:
        code = main(argv + ["--out", str(tmp_path)])
    except SystemExit as e:  # argparse's own errors
        code = e.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err and "error" in err[-1]


def test_transfer_counter_and_host_op_check():
    counter = TransferCounter()
    x = counter.put({"a": jnp.zeros(3), "b": jnp.ones(2)})
    counter.get(x["a"])
    assert counter.as_dict() == dict(h2d=1, d2h=1, h2d_arrays=2, d2h_arrays=1)

    def quiet(x):
        return jnp.sin(x) * 2

    def chatty(x):
        jax.debug.callback(lambda v: None, x)
        return x + 1

    x = jnp.ones(3)
    lowered = jax.jit(quiet).lower(x)
    assert host_ops(lowered, lowered.compile()) == []
    lowered = jax.jit(chatty).lower(x)
    assert host_ops(lowered) and host_ops(lowered.compile())


def test_reference_subprocess_gets_flags_and_is_parsed(tmp_path):
    script = tmp_path / "ref.py"
    script.write_text(
        "import json, os, sys\n"
        "print('noise')\n"
        "print(json.dumps(dict(seeds=int(sys.argv[2]), timesteps=int(sys.argv[4]),"
        " compile_s=1.0, run_s=2.0, sps=3, final_return=4.0,"
        " flags=os.environ.get('XLA_FLAGS', ''))))\n"
    )
    record = train_speed.run_reference(script, 3, 1024)
    assert record["seeds"] == 3 and record["timesteps"] == 1024
    assert record["flags"] == os.environ["XLA_FLAGS"]
    assert "concurrency_optimized_scheduler=false" in record["flags"]

    script.write_text("import sys\nsys.exit('boom')\n")
    with pytest.raises(train_speed.BenchError, match="boom"):
        train_speed.run_reference(script, 1, 1024)


def test_bench_train_names_the_timed_learner_and_env(monkeypatch):
    """A recipe's learner and env (not PPO on CartPole) head the table."""
    timed = dict(sps=1.0, compile_s=1.0, run_s=1.0, final_return=0.0, seeds=1)
    monkeypatch.setattr(
        train_speed,
        "bench_seeds",
        lambda *a, **k: dict(timed, timesteps=a[1], devices=1, matmul_gflops=1.0),
    )
    monkeypatch.setattr(train_speed, "matmul_peak", lambda: 1e9)
    train = train_speed.run_train_bench((1,), 64, None, 1, recipe="pendulum_sac")
    assert (train["algo"], train["env"]) == ("sac", "Pendulum-v1")
    assert train_table(train).title.startswith("bench train: SAC Pendulum-v1")
