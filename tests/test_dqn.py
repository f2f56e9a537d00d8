"""DQN: replay buffer, n-step targets, probe-env values, truncation,
determinism, recompiles, host silence, recipes (slow)."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ondevice_rl.files import checkpoint
from ondevice_rl.metrics import EPISODE_METRICS, final_return
from ondevice_rl.replay import ReplayBuffer
from ondevice_rl.rollout import Transition
from ondevice_rl.train import dqn
from ondevice_rl.train.kit import registry

#: Every metric the learner reports per update.
METRIC_NAMES = EPISODE_METRICS + dqn.LossStats._fields + ("epsilon",)

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

RECIPES = Path(dqn.__file__).parent.parent / "recipes"

# --- replay buffer ---------------------------------------------------------------


def test_replay_buffer_add_and_sample_under_jit_and_vmap():
    capacity, num_envs, members = 5, 3, 2

    def fill(member):
        example = {"x": jnp.zeros((num_envs,), jnp.int32)}
        buffer = ReplayBuffer.create(example, capacity)
        env_ids = jnp.arange(num_envs)

        def rows(t0, count):  # value = member·1000 + time·10 + env
            t = t0 + jnp.arange(count)[:, None]
            return {"x": (member * 1000 + t * 10 + env_ids).astype(jnp.int32)}

        for t in range(4):  # one row at a time (dynamic_update_slice path)
            buffer = buffer.add(rows(t, 1))
        buffer = buffer.add(rows(4, 3))  # three rows, wrapping (scatter path)
        seqs = buffer.sample(jax.random.PRNGKey(member), 400, length=2)
        return buffer.added, buffer.size(), buffer.can_sample(5), seqs

    added, size, ready, seqs = jax.jit(jax.vmap(fill))(jnp.arange(members))
    assert added.tolist() == [7, 7] and size.tolist() == [5, 5] and bool(ready.all())
    x = np.asarray(seqs["x"])  # [members, length, batch]
    assert x.shape == (members, 2, 400)
    member, time, env = x // 1000, (x % 1000) // 10, x % 10
    assert np.all(member == np.arange(members)[:, None, None])
    assert np.all(env[:, 0] == env[:, 1])  # one environment per sequence
    assert np.all(time[:, 1] == time[:, 0] + 1)  # consecutive steps
    assert set(np.unique(time[:, 0])) == {2, 3, 4, 5}  # held: times 2..6
    assert set(np.unique(env)) == {0, 1, 2}


def test_replay_buffer_before_full_samples_only_written_rows():
    buffer = ReplayBuffer.create({"x": jnp.zeros((2,))}, capacity=10)
    assert not bool(buffer.can_sample())
    buffer = buffer.add({"x": jnp.ones((3, 2))})
    assert bool(buffer.can_sample(3)) and not bool(buffer.can_sample(4))
    seqs = jax.jit(lambda b, k: b.sample(k, 256, 3))(buffer, jax.random.PRNGKey(0))
    assert np.all(np.asarray(seqs["x"]) == 1.0)


# --- targets and loss --------------------------------------------------------------


def _numpy_n_step(r, v, term, trunc, gamma):
    """Reference: sum rewards until an episode end or the sequence's end."""
    n, m = r.shape
    out = np.zeros(m)
    for j in range(m):
        total, discount = 0.0, 1.0
        for i in range(n):
            total += discount * r[i, j]
            discount *= gamma
            if term[i, j]:
                break
            if trunc[i, j] or i == n - 1:
                total += discount * v[i, j]
                break
        out[j] = total
    return out


def _seq(r, term, trunc):
    r = jnp.asarray(r, jnp.float32)
    return Transition(
        obs=None,
        action=None,
        reward=r,
        terminated=jnp.asarray(term, bool),
        truncated=jnp.asarray(trunc, bool),
        final_obs=None,
        extras=(),
    )


def test_n_step_targets_hand_worked():
    # Three 3-step sequences, gamma = 0.5, rewards 1, values of final_obs 5, 6, 7.
    r = np.ones((3, 3))
    v = np.array([[5.0] * 3, [6.0] * 3, [7.0] * 3])
    term = np.zeros((3, 3), bool)
    trunc = np.zeros((3, 3), bool)
    term[1, 1] = True  # column 1 terminates at its second step
    trunc[0, 2] = True  # column 2 is truncated at its first step
    got = dqn.td_targets(_seq(r, term, trunc), jnp.asarray(v), jnp.float32(0.5), 3)
    expected = [1 + 0.5 + 0.25 + 0.125 * 7, 1 + 0.5, 1 + 0.5 * 5]  # 2.625, 1.5, 3.5
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-6)


@pytest.mark.parametrize("n", [1, 2, 5])
def test_n_step_targets_match_numpy(n):
    rng = np.random.default_rng(n)
    m = 256
    r = rng.normal(size=(n, m))
    v = rng.normal(size=(n, m))
    term = rng.random((n, m)) < 0.2
    trunc = rng.random((n, m)) < 0.2
    got = dqn.td_targets(_seq(r, term, trunc), jnp.asarray(v), jnp.float32(0.9), n)
    np.testing.assert_allclose(
        np.asarray(got), _numpy_n_step(r, v, term, trunc, 0.9), rtol=1e-5, atol=1e-5
    )


def test_bootstrap_values_and_losses():
    q_target = jnp.array([[1.0, 5.0], [3.0, 2.0]])
    q_online = jnp.array([[2.0, 1.0], [0.0, 4.0]])
    np.testing.assert_array_equal(dqn.bootstrap_values(q_target), [5.0, 3.0])
    np.testing.assert_array_equal(dqn.bootstrap_values(q_target, q_online), [1.0, 2.0])

    def apply_fn(params, obs):
        return params * obs  # Q [M, A]

    obs = jnp.ones((2, 2))
    action = jnp.array([0, 1])
    targets = jnp.array([4.0, 2.5])  # TD errors -3 and -0.5
    mse, stats = dqn.td_loss(apply_fn, q_target, obs, action, targets, "mse")
    huber, _ = dqn.td_loss(apply_fn, q_target, obs, action, targets, "huber")
    assert float(mse) == pytest.approx((9 + 0.25) / 2)
    assert float(huber) == pytest.approx((2.5 + 0.125) / 2)
    assert float(stats.q_mean) == pytest.approx(1.5)


# --- probes: known values --------------------------------------------------------

PROBE = dict(
    num_envs=8,
    buffer_size=512,
    batch_size=64,
    learning_starts=256,
    target_update_every=32,
    exploration_steps=1_000,
    hidden=(16,),
    learning_rate=3e-3,
    gamma=0.9,
)


def _greedy_q(config, params, obs) -> float:
    network = dqn.make_trainer(config).network
    return float(network.apply(params, jnp.asarray(obs, jnp.float32)).max())


def _train(config, seed=0):
    return jax.jit(dqn.make_train(config))(jax.random.PRNGKey(seed), config.hyperparams)


def test_probe_truncation_bootstraps_and_traced_values_matter_without_recompile():
    # gamma=0.9: true value 10; treating the time limit as termination gives
    # at most 3.6 (see envs/probes.py). Two seeds as one vmapped program; a
    # second call with gamma=0.5 (true value 2) must reuse the compilation.
    config = dqn.DQNConfig(env="Probe-Truncation-v0", total_timesteps=12_000, **PROBE)
    train = jax.jit(jax.vmap(dqn.make_train(config)))
    keys = jax.random.split(jax.random.PRNGKey(0), 2)

    def population(**overrides):
        hp = config.hyperparams._replace(
            **{k: jnp.float32(v) for k, v in overrides.items()}
        )
        return jax.tree.map(lambda x: jnp.stack([x, x]), hp)

    for gamma, value in [(0.9, 10.0), (0.5, 2.0)]:
        out = train(keys, population(gamma=gamma))
        for member in range(2):
            params = jax.tree.map(lambda x, m=member: x[m], out.state.params)
            q = _greedy_q(config, params, [1.0])
            assert q == pytest.approx(value, abs=0.05 * value), (gamma, member)
    assert train._cache_size() == 1


def test_probe_one_step_with_n_step_stops_at_termination():
    # Every 3-step sequence crosses two terminations: Q must stay 1, not 2.71.
    config = dqn.DQNConfig(
        env="Probe-OneStep-v0", total_timesteps=8_000, n_step=3, **PROBE
    )
    out = _train(config)
    assert _greedy_q(config, out.state.params, [1.0]) == pytest.approx(1.0, abs=0.05)


def test_probe_two_step_double_dqn_huber():
    config = dqn.DQNConfig(
        env="Probe-TwoStep-v0",
        total_timesteps=12_000,
        double_dqn=True,
        loss="huber",
        **PROBE,
    )
    out = _train(config)
    assert _greedy_q(config, out.state.params, [0.0]) == pytest.approx(0.9, abs=0.05)
    assert _greedy_q(config, out.state.params, [1.0]) == pytest.approx(1.0, abs=0.05)
    for name in METRIC_NAMES:
        assert np.all(np.isfinite(np.asarray(out.metrics[name]))), name


# --- host silence; one small program: determinism, transfers, schedule ----------

HOST_MARKERS = ("callback", "infeed", "outfeed", "send", "recv")


def test_lowered_program_has_no_host_traffic():
    config = dqn.DQNConfig()  # CartPole, the reference's settings
    lowered = jax.jit(dqn.make_train(config)).lower(
        jax.random.PRNGKey(0), config.hyperparams
    )
    text = lowered.as_text().lower()
    assert [m for m in HOST_MARKERS if m in text] == []


# A probe env: CartPole compiles several times slower and adds nothing here.
TINY = dqn.DQNConfig(
    env="Probe-TwoStep-v0",
    total_timesteps=1_000,
    num_envs=4,
    buffer_size=400,
    batch_size=32,
    learning_starts=200,
    target_update_every=8,
    tau=0.5,
    exploration_steps=800,
    hidden=(16,),
)


def test_deterministic_transfer_free_and_learning_starts():
    tiny_train = jax.jit(dqn.make_train(TINY))
    key = jax.device_put(jax.random.PRNGKey(3))
    hp = jax.device_put(TINY.hyperparams)
    first = jax.device_get(tiny_train(key, hp).metrics)  # compiles
    with jax.transfer_guard("disallow"):
        again = jax.block_until_ready(tiny_train(key, hp).metrics)
    again = jax.device_get(again)
    other = jax.device_get(tiny_train(jax.random.PRNGKey(4), hp).metrics)
    assert set(first) == set(METRIC_NAMES)
    for name in first:
        assert first[name].shape == (TINY.num_updates,), name
        np.testing.assert_array_equal(first[name], again[name])
        assert np.all(np.isfinite(first[name])), name
    assert not np.array_equal(first["td_loss"], other["td_loss"])

    # The first update with gradient steps: the one whose env steps reach
    # learning_starts (a multiple of steps_per_update here).
    start = TINY.learning_starts // TINY.steps_per_update - 1
    assert np.all(first["td_loss"][:start] == 0.0)
    assert np.all(first["td_loss"][start:] > 0.0)
    epsilon = first["epsilon"]
    assert epsilon[0] == pytest.approx(1.0) and epsilon[-1] == pytest.approx(0.05)
    assert np.all(np.diff(epsilon) <= 0.0)


# --- configuration, registry ------------------------------------------------------


def test_defaults_are_the_reference_settings():
    config = dqn.DQNConfig()
    assert (config.num_envs, config.buffer_size, config.batch_size) == (10, 10_000, 128)
    assert config.learning_starts == 10_000 and config.target_update_every == 500
    assert config.steps_per_update == 10 and config.num_updates == 50_000
    assert config.exploration_steps == 250_000 and config.hidden == (120, 84)
    assert (config.eps_start, config.eps_end, config.tau) == (1.0, 0.05, 1.0)
    assert config.learn_batch_size == 128 and config.loss == "mse"


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(buffer_size=100, batch_size=128), "less than batch_size"),
        (dict(n_step=0), "n_step must be a positive int"),
        (dict(loss="l1"), "loss must be one of mse, huber"),
        (dict(learning_starts=-1), "learning_starts must be a non-negative int"),
        (dict(buffer_size=20, batch_size=10, n_step=3), "needs at least 3"),
        (dict(tau=0.0), r"tau=0.0 is outside \(0, 1\]"),
        (dict(eps_end=1.5), "eps_end"),
        (dict(double_dqn=1), "double_dqn must be a bool"),
    ],
)
def test_config_validation_messages(changes, message):
    with pytest.raises(ValueError, match=message) as info:
        dqn.DQNConfig(**changes)
    assert "\n" not in str(info.value)


def test_continuous_env_rejected_in_one_line():
    config = dqn.DQNConfig(env="Pendulum-v1")
    for check in (
        lambda: dqn.make_trainer(config),
        lambda: dqn.make_train(config),
    ):
        with pytest.raises(ValueError, match="dqn.*Pendulum-v1") as info:
            check()
        assert "\n" not in str(info.value)


def test_registered():
    algorithm = registry.get_algorithm("dqn")
    assert algorithm is dqn.ALGORITHM and not algorithm.continuous_actions
    assert algorithm.hyperparam_fields == dqn.Hyperparams._fields
    assert "buffer_size" in algorithm.static_fields
    assert "tau" not in algorithm.static_fields


def test_state_with_buffer_checkpoints(tmp_path):
    config = dqn.DQNConfig(buffer_size=1_000)  # CartPole: obs [4], 10 envs
    init = jax.jit(dqn.make_trainer(config).init)  # one compile, not one per op
    state = init(jax.random.PRNGKey(0), config.hyperparams)
    assert state.extra.buffer.data.obs.shape == (100, 10, 4)
    restored = checkpoint.restore(checkpoint.save(tmp_path / "ckpt", state), state)
    for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(restored), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


# --- learning (slow): the shipped recipes ---------------------------------------


def _recipe(name: str) -> dqn.DQNConfig:
    values = tomllib.loads((RECIPES / f"{name}.toml").read_text())
    assert values.pop("algo") == "dqn"
    values["hidden"] = tuple(values["hidden"])
    return dqn.DQNConfig(**values)


def _final_returns(config: dqn.DQNConfig, seeds: int) -> np.ndarray:
    keys = jax.random.split(jax.random.PRNGKey(0), seeds)
    hp = jax.tree.map(lambda x: jnp.broadcast_to(x, (seeds,)), config.hyperparams)
    out = jax.jit(jax.vmap(dqn.make_train(config)))(keys, hp)
    return final_return(np.asarray(out.metrics["episode_return"]))  # [seeds]


@pytest.mark.slow
def test_cartpole_recipe_eight_seeds_reach_475():
    config = _recipe("cartpole_dqn")
    assert config.env == "CartPole-v1" and config.total_timesteps <= 500_000
    final = _final_returns(config, 8)
    assert final.mean() >= 475.0, final


@pytest.mark.slow
def test_acrobot_recipe_reaches_minus_100():
    config = _recipe("acrobot_dqn")
    assert config.env == "Acrobot-v1" and config.total_timesteps <= 500_000
    final = _final_returns(config, 8)
    assert final.mean() >= -100.0, final
