"""``bench host``: every backend at a tiny size (2 updates of 4 envs × 128
steps of the ``cartpole_ppo`` learner), exact transfer counts, the busy
share, the learner's update, and the CLI's one-line refusals."""

import json

import jax
import numpy as np
import pytest

from ondevice_rl.normalize import normalize_rollout
from ondevice_rl.rollout import Transition
from ondevice_rl.train import ppo
from ondevice_rl.train.bench import host
from ondevice_rl.train.bench.host.envpool_xla import train_envpool_xla
from ondevice_rl.train.bench.host.fused import train_fused
from ondevice_rl.train.bench.host.learner import host_learner
from ondevice_rl.train.bench.host.targets import host_target
from ondevice_rl.train.cli import main
from ondevice_rl.train.kit.on_policy import on_policy_learn
from ondevice_rl.train.kit.registry import trainer_for

# Its module-scoped programs are built once: its tests share one xdist worker.
pytestmark = pytest.mark.xdist_group("bench-host")

needs_envpool = pytest.mark.skipif(
    not host.envpool_installed(),
    reason="EnvPool is not installed (the host extra: CPython 3.11-3.13, x86-64 Linux)",
)
U, T, B = 2, 128, 4  # updates, steps per rollout, envs


@pytest.fixture(scope="module")
def target():
    target = host_target("CartPole-v1", None, "ppo", B, U * T * B)
    assert (target.recipe, target.config.num_updates) == ("cartpole_ppo", U)
    return target


def out_leaves(target) -> int:
    """Arrays the policy hands back per call: env action, action, extras."""
    trainer = trainer_for(target.config)
    learner = host_learner(trainer)
    state = trainer.init(jax.random.PRNGKey(0), target.config.hyperparams)
    obs = np.zeros((B, 4), np.float32)
    out, _ = learner.act(state.params, state.normalizer, obs, jax.random.PRNGKey(0))
    return len(jax.tree.leaves(out))


def check_common(record: dict) -> None:
    assert record["timesteps"] == U * T * B and record["updates"] == U
    assert 0 < record["busy_share"] <= 1
    assert record["sps"] > 0 and np.isfinite(record["final_return"])


@pytest.mark.parametrize(
    "backend",
    ["gym-sync", "gym-async", pytest.param("envpool-sync", marks=needs_envpool)],
)
def test_synchronous_backends_count_every_transfer(target, backend):
    record = host.run_backend(backend, target, seed=0, async_batch=2)
    check_common(record)
    k = out_leaves(target)
    # Per step: observations in (the jitted policy's argument), its outputs
    # out in one get; per update: the rollout in (one put of 7 arrays + extras).
    traj_leaves = 6 + (k - 2)
    assert record["transfers"] == dict(
        h2d=U * T + U,
        d2h=U * T,
        h2d_arrays=U * T + U * traj_leaves,
        d2h_arrays=U * T * k,
    )
    assert record["transfers_per_update"] == 2 * T + 1
    assert record["policy_lag"] == 0.0


@needs_envpool
def test_envpool_async_acts_on_ready_envs_and_reports_its_lag(target):
    record = host.run_backend("envpool-async", target, seed=0, async_batch=2)
    check_common(record)
    calls = record["transfers"]["d2h"]  # one policy call per batch handed back
    assert calls >= U * T * B // 2  # each of 2 envs per call: at least T each
    assert record["transfers"]["h2d"] == calls + U
    assert record["transfers_per_update"] == pytest.approx(
        (2 * calls + U) / U, abs=0.01
    )
    assert record["policy_lag"] >= 0.0


@needs_envpool
def test_envpool_xla_steps_inside_the_program(target):
    record = train_envpool_xla(trainer_for(target.config), "CartPole-v1", 0, True)
    check_common(record)
    assert record["transfers_per_update"] == 0 and record["one_off_transfers"] == 2
    assert record["env_steps_taken"] >= U * T * B  # reset steps and overshoot


@needs_envpool
def test_envpool_xla_float64_task_reads_its_envs_right():
    """Hopper-v4's EnvPool step takes and returns float64: made and traced
    with x64 on, its observations and rewards come back whole (made without
    it they came back garbled: NaN actions, returns of 1e27)."""
    hopper = host_target("Hopper-v4", None, "ppo", B, U * T * B)
    record = train_envpool_xla(trainer_for(hopper.config), "Hopper-v4", 0, False)
    # About 1 per step while the hopper stays up; episodes end within 1000.
    assert 0 < record["final_return"] < 1000, record["final_return"]
    assert record["env_steps_taken"] >= U * T * B


def test_fused_program_never_talks_to_the_host(target):
    (record,) = train_fused(target.config, [0])
    check_common(record)
    assert record["host_ops"] == [] and record["transfers_per_update"] == 0
    assert record["one_off_transfers"] == 2


def test_host_learn_is_the_fused_update_bitwise(target):
    """The bench's jitted ``learn`` (host NumPy in) equals what the fused
    update does with one fixed rollout: normalise, then the on-policy kit's
    ``on_policy_learn`` of PPO's part."""
    trainer = trainer_for(target.config)
    hp = target.config.hyperparams
    state = trainer.init(jax.random.PRNGKey(3), hp)
    rng = np.random.default_rng(0)
    out = jax.device_get(
        host_learner(trainer).act(
            state.params, state.normalizer, rng.normal(size=(B, 4)).astype(np.float32),
            jax.random.PRNGKey(1),
        )[0]
    )  # fmt: skip
    traj = Transition(
        obs=rng.normal(size=(T, B, 4)).astype(np.float32),
        action=rng.integers(0, 2, (T, B)).astype(out[1].dtype),
        reward=np.ones((T, B), np.float32),
        terminated=rng.random((T, B)) < 0.05,
        truncated=np.zeros((T, B), bool),
        final_obs=rng.normal(size=(T, B, 4)).astype(np.float32),
        extras=jax.tree.map(
            lambda x: rng.normal(size=(T, *x.shape)).astype(x.dtype), out[2]
        ),
    )
    key = jax.random.PRNGKey(7)
    params, *_ = host_learner(trainer).learn(
        state.params, state.opt_state, state.normalizer, traj, key, hp
    )

    learn = on_policy_learn(
        target.config, ppo.make_learner(target.config, trainer.setup)
    )

    @jax.jit
    def fused_learn(params, opt_state, norm, traj, key, hp):
        key, learn_key = jax.random.split(key)
        norm, traj = normalize_rollout(norm, traj, hp.gamma)
        params, opt_state, _ = learn(params, opt_state, traj, learn_key, hp)
        return params, opt_state, norm, key

    expected = fused_learn(
        state.params, state.opt_state, state.normalizer, traj, key, hp
    )[0]
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(expected), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    moved = jax.tree.leaves(
        jax.tree.map(lambda a, b: np.any(a != b), params, state.params)
    )
    assert any(moved)  # the update did change the parameters


def test_cli_table_json_and_plot(tmp_path, capsys):
    argv = ["bench", "host", "--backends", "gym-sync,fused", "--num-envs", str(B),
            "--timesteps", str(U * T * B), "--seeds", "0,1", "--json", "--out",
            str(tmp_path)]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    record = json.loads(out.strip().splitlines()[-1])
    assert json.loads((tmp_path / "host.json").read_text()) == record
    assert (tmp_path / "host.png").stat().st_size > 0
    (result,) = record["results"]
    rows = {r["backend"]: r for r in result["rows"]}
    assert (
        rows["gym-sync"]["seeds"] == [0, 1] and len(rows["fused"]["final_returns"]) == 2
    )
    assert isinstance(rows["gym-sync"]["within_fused_range"], bool)
    assert result["fused_lead"]["over"] == "gym-sync"
    assert "bench host: CartPole-v1" in out and "busy share" in out


def test_help_shows_only_host_flags(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "host", "--help"])
    text = capsys.readouterr().out
    assert "--backends" in text and "--port" in text and "--async-batch" in text
    assert "--batch-sizes" not in text and "--reference" not in text


@pytest.mark.parametrize(
    "args, says",
    [
        (["--backends", "nosuch"], "unknown nosuch"),
        (["--algo", "dqn"], "ppo or a2c"),
        (["--port", "CartPole-v1"], "HOST=PORT"),
        (["--port", "Acrobot-v1=Acrobot-v1"], "not in --envs"),
        (["--async-batch", "16"], "below --num-envs"),
        (["--envs", "NoSuch-v0"], "--envs NoSuch-v0"),
        (["--envs", "Pendulum-v1", "--port", "Pendulum-v1=CartPole-v1"], "spaces"),
        (["--timesteps", "10"], "less than one update"),
        (["--seeds", "3..1"], "--seeds"),
    ],
)
def test_bad_input_is_one_line_before_compiling(args, says, tmp_path, capsys):
    assert main(["bench", "host", *args, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err
    assert not (tmp_path / "o").exists()


def test_envpool_backends_without_envpool_name_the_extra(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(host, "envpool_installed", lambda: False)
    argv = ["bench", "host", "--backends", "envpool-sync", "--out", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ondevice-rl[host]" in err[0]
