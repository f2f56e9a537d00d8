"""SAC and TD3: the squashed Gaussian, the unit box, the window of finished
episodes, update shapes, truncation-aware targets, a continuous probe with a
known best action and value (one compiled program per learner, also run for
determinism, the transfer guard and new traced values), host silence,
config errors; Pendulum and brax learning under ``slow``.

Programs here are compiled with XLA's backend optimisation off (a few
times faster to build on CPU, slower to run: tiny configs), but for the
probe's, which runs long enough for optimisation to pay.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from suite_flags import FAST, OPTIMISED

from ondevice_rl.env.spaces import Box
from ondevice_rl.evaluation import evaluate
from ondevice_rl.metrics import EPISODE_METRICS
from ondevice_rl.nn.continuous_control import BoxScale, TwinCritic, squashed_sample
from ondevice_rl.normalize import normalize_obs
from ondevice_rl.rollout import EpisodeInfo, Transition
from ondevice_rl.train import get_algorithm, sac, td3
from ondevice_rl.train.kit.off_policy import (
    Model,
    Nets,
    RecentReturns,
    replay_shape,
)
from ondevice_rl.train.kit.state import policy_params
from ondevice_rl.train.sweep import DEFAULT_CACHE, build_plan, run_sweep

# Its module-scoped programs are built once: its tests share one xdist worker.
pytestmark = pytest.mark.xdist_group("off_policy")

HOST_MARKERS = ("callback", "infeed", "outfeed", "send", "recv")
STATS = {"sac": sac.SACStats, "td3": td3.TD3Stats}

# --- pieces ----------------------------------------------------------------------


def test_squashed_sample_log_density_by_change_of_variables():
    mean = jnp.array([[0.3, -2.0], [1.5, 0.0]])
    log_std = jnp.array([[-0.5, 0.2], [0.0, -3.0]])
    sample = jax.jit(squashed_sample)
    u, log_prob = sample(jax.random.key(1), mean, log_std)
    assert u.shape == (2, 2) and log_prob.shape == (2,)
    x = np.arctanh(np.asarray(u, np.float64))
    std = np.exp(np.asarray(log_std, np.float64))
    gaussian = -0.5 * ((x - mean) / std) ** 2 - np.log(std) - 0.5 * math.log(2 * np.pi)
    expected = np.sum(gaussian - np.log1p(-(np.tanh(x) ** 2)), axis=-1)
    np.testing.assert_allclose(log_prob, expected, rtol=1e-4)
    # Saturated: tanh(x) rounds to 1 in float32, the density stays finite.
    _, far = sample(jax.random.key(2), jnp.array([30.0]), jnp.array([-5.0]))
    assert np.isfinite(far) and float(far) > 40.0


def test_box_scale_maps_the_unit_box_and_refuses_unbounded_boxes():
    scale = BoxScale.of(Box(np.array([-1.0, 0.0]), np.array([3.0, 10.0]), (2,)))
    corners = scale.to_box(jnp.array([[-1.0, -1.0], [0.0, 0.0], [1.0, 1.0]]))
    np.testing.assert_allclose(corners, [[-1.0, 0.0], [1.0, 5.0], [3.0, 10.0]])
    with pytest.raises(ValueError, match="must be bounded"):
        BoxScale.of(Box(-np.inf, 1.0, (1,)))


def test_twin_critics_start_apart():
    critic = TwinCritic((8,), "swish")
    obs, action = jax.random.normal(jax.random.key(1), (5, 3)), jnp.ones((5, 1))

    @jax.jit
    def values(key):
        params = critic.init(key, jnp.zeros(3), jnp.zeros(1))
        return params, critic.apply(params, obs, action)

    params, q = values(jax.random.key(0))
    assert q.shape == (5, 2) and not np.allclose(q[:, 0], q[:, 1])
    assert all(leaf.shape[0] == 2 for leaf in jax.tree.leaves(params))


def test_recent_returns_keep_the_last_finished_episodes_in_order():
    @jax.jit
    def add(recent, done, returns):
        recent = recent.add(EpisodeInfo(done, returns, None))
        return recent, recent.mean()

    recent = RecentReturns.create(window=3)
    assert np.isnan(recent.mean())
    done = jnp.array([[True, False], [False, True]])  # [T, B]
    recent, mean = add(recent, done, jnp.array([[1.0, 9.0], [9.0, 2.0]]))
    assert int(recent.count) == 2 and float(mean) == 1.5
    # Four more end in one update: only the last three are kept.
    done = jnp.array([[True, True], [True, True]])
    recent, mean = add(recent, done, jnp.array([[3.0, 4.0], [5.0, 6.0]]))
    assert int(recent.count) == 6 and float(mean) == 5.0
    same, _ = add(recent, jnp.zeros((2, 2), bool), jnp.zeros((2, 2)))
    for a, b in zip(same, recent, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "utd, envs, shape",
    [(1.0, 1, (1, 1)), (0.25, 1, (4, 1)), (1.0, 16, (1, 16)), (0.1, 16, (5, 8))],
)
def test_update_to_data_ratio_sets_vector_and_gradient_steps(utd, envs, shape):
    assert replay_shape(utd, envs) == shape
    config = sac.SACConfig(utd_ratio=utd, num_envs=envs, buffer_size=4096)
    assert (config.vector_steps, config.gradient_steps) == shape
    assert config.steps_per_update == shape[0] * envs


def _constant_nets(name: str, q_value: float) -> Nets:
    """Networks of one-number observations: the actor acts 0 (SAC's with a
    vanishing std), every critic says ``q_value``."""

    def actor(flat, obs):
        zeros = jnp.zeros(obs.shape[:-1] + (1,))
        return (zeros, zeros - 20.0) if name == "sac" else zeros

    def critic(flat, obs, action):
        return jnp.full(obs.shape[:-1] + (2,), q_value)

    return Nets(actor, critic)


@pytest.mark.parametrize("name", ["sac", "td3"])
def test_targets_bootstrap_at_truncation_not_at_termination(name):
    # Two 2-step sequences, rewards 1, every bootstrap value 10, γ = 0.5:
    # one truncated at its first step (1 + 0.5·10), one terminated (1).
    seq = Transition(
        obs=None,
        action=None,
        reward=jnp.ones((2, 2)),
        terminated=jnp.array([[False, True], [False, False]]),
        truncated=jnp.array([[True, False], [False, False]]),
        final_obs=jnp.zeros((2, 2, 1)),
        extras=(),
    )
    config = get_algorithm(name).config()
    hp = config.hyperparams._replace(gamma=jnp.float32(0.5))
    key = jax.random.key(0)
    nets = _constant_nets(name, 10.0)
    model = Model(None, None, None, None, None, 0)
    if name == "sac":  # α = 0: the soft value is the critic's
        got = jax.jit(lambda: sac.soft_targets(nets, model, seq, key, 0.0, 0.5, 2))()
    else:
        got = jax.jit(lambda: td3.smoothed_targets(nets, model, seq, key, hp, 2))()
    np.testing.assert_allclose(got, [6.0, 1.0], rtol=1e-6)


# --- the continuous probe: one program per learner ---------------------------------

#: Probe-Box-v0: one step, reward 1 − (a − 2)², a in [-1, 3]: a* = 2, Q(a*) = 1.
PROBE = dict(
    env="Probe-Box-v0",
    total_timesteps=3_000,
    num_envs=8,
    utd_ratio=0.5,  # 4 gradient steps per vector step of 8 envs
    batch_size=64,
    learning_starts=128,
    hidden=(32, 32),
    learning_rate=3e-3,
)
#: New values of every traced hyperparameter (no recompile).
CHANGED = {
    "sac": dict(tau=0.05, learning_rate=1e-3, alpha=0.3, gamma=0.5),
    "td3": dict(
        tau=0.05, learning_rate=1e-3, exploration_noise=0.2, target_noise=0.1,
        target_noise_clip=0.3, gamma=0.5,
    ),
}  # fmt: skip


@pytest.fixture(scope="module", params=["sac", "td3"])
def probe(request):
    """``(name, config, trainer, jitted population program, keys, output)``:
    two seeds of the learner on Probe-Box-v0."""
    name = request.param
    algorithm = get_algorithm(name)
    config = algorithm.config(**PROBE)
    trainer = algorithm.make_trainer(config)
    # 1,500 gradient steps: optimised, SAC's program compiles in ~2 s more and
    # runs in 0.5 s instead of 3.7 s (three runs here).
    train = jax.jit(
        jax.vmap(algorithm.make_train(config), in_axes=(0, None)),
        compiler_options=OPTIMISED,
    )
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    out = jax.device_get(train(keys, config.hyperparams))
    return name, config, trainer, train, keys, out


def test_probe_best_action_and_its_value(probe):
    name, config, trainer, _, _, out = probe
    critic = TwinCritic(config.hidden, config.activation, obs_ndim=1)

    @jax.jit
    @jax.vmap
    def greedy_and_values(state):
        action, _ = trainer.policy(policy_params(state), (), jnp.ones(1), None, True)
        seen = normalize_obs(state.normalizer, jnp.ones((3, 1)))
        # Unit actions 0.5, -0.5, 0: a = 2, 0, 1 in the Box [-1, 3].
        units = jnp.array([[0.5], [-0.5], [0.0]])
        return action[0], critic.apply(state.extra.critic, seen, units)

    actions, q = greedy_and_values(out.state)  # [2], [2, 3, 2]: seeds, a, critics
    np.testing.assert_allclose(actions, 2.0, atol=0.1, err_msg=name)
    np.testing.assert_allclose(q[:, 0], 1.0, atol=0.05, err_msg=name)
    np.testing.assert_allclose(q[:, 1], -3.0, atol=0.3, err_msg=name)
    np.testing.assert_allclose(q[:, 2], 0.0, atol=0.1, err_msg=name)


def test_probe_metrics_and_learning_starts(probe):
    name, config, _, _, _, out = probe
    metrics = out.metrics
    assert set(metrics) == set(EPISODE_METRICS) | set(STATS[name]._fields)
    for key, values in metrics.items():
        assert values.shape == (2, config.num_updates), key
        assert np.all(np.isfinite(values)), key
    # The first update with gradient steps: the one whose env steps reach
    # learning_starts (a multiple of steps_per_update here).
    start = config.learning_starts // config.steps_per_update - 1
    assert np.all(metrics["critic_loss"][:, :start] == 0.0)
    assert np.all(metrics["critic_loss"][:, start:] > 0.0)
    # The final return: the last finished episodes' mean, near V* = 1.
    assert np.all(metrics["episode_return"][:, -1] > 0.9)
    if name == "sac":  # the temperature moved toward the target entropy
        assert np.all(metrics["alpha"][:, -1] < 0.5)


@pytest.mark.parametrize(
    "probe",
    [
        "sac",
        # The off-policy kit's one population scaffold, as sac's: slow.
        pytest.param("td3", marks=pytest.mark.slow),
    ],
    indirect=True,
)
def test_probe_program_is_deterministic_transfer_free_and_traced(probe):
    name, config, _, train, keys, out = probe
    args = jax.device_put((keys, config.hyperparams))
    with jax.transfer_guard("disallow"):
        again = jax.block_until_ready(train(*args).metrics)
    for key, values in jax.device_get(again).items():
        np.testing.assert_array_equal(values, out.metrics[key], err_msg=key)
    changed = config.replace(**CHANGED[name]).hyperparams
    other = jax.device_get(train(keys, changed).metrics)
    assert train._cache_size() == 1
    assert not np.array_equal(other["critic_loss"], out.metrics["critic_loss"])


def test_lowered_program_has_no_host_traffic(probe):
    _, config, _, train, keys, _ = probe
    text = train.lower(keys, config.hyperparams).as_text().lower()
    assert [m for m in HOST_MARKERS if m in text] == []


# --- sweeps ------------------------------------------------------------------------


def test_sweep_groups_by_update_to_data_ratio_and_reuses_its_program(monkeypatch):
    monkeypatch.setattr(DEFAULT_CACHE, "compiler_options", FAST)
    config = sac.SACConfig(
        env="Probe-Box-v0", total_timesteps=64, num_envs=4, learning_starts=16,
        buffer_size=64, batch_size=8, hidden=(8,),
    )  # fmt: skip
    # A static field (a loop length) makes groups; traced ones share one.
    plan = build_plan(config, 2, {"utd_ratio": [0.5, 1.0], "tau": [0.01, 0.1]})
    assert plan.swept == ("utd_ratio", "tau") and len(plan.members) == 8
    assert len({m.config.gradient_steps for m in plan.members}) == 2
    first = run_sweep(config, 2, {"learning_rate": [1e-3, 1e-2], "alpha": [0.5, 1.0]})
    assert first.programs_compiled == 1 and len(first.finished) == 8
    losses = np.stack([first.metrics[m.index]["critic_loss"] for m in first.finished])
    assert len({row.tobytes() for row in losses}) == 8  # every member its own
    again = run_sweep(config, [5, 6], {"tau": [0.05], "gamma": [0.5, 0.9]})
    assert again.programs_compiled == 0


# --- configuration -----------------------------------------------------------------


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(buffer_size=100, batch_size=128), "less than batch_size"),
        (dict(learning_starts=-1), "learning_starts must be a non-negative int"),
        (dict(utd_ratio=0.0), "utd_ratio must be positive"),
        (dict(utd_ratio=1 / 3001), "is not a fraction g/k"),
        (dict(n_step=0), "n_step must be a positive int"),
        (dict(buffer_size=20, batch_size=10, n_step=30), "needs at least 30"),
        (dict(tau=0.0), r"tau=0.0 is outside \(0, 1\]"),
        (dict(learn_alpha=1), "learn_alpha must be a bool"),
        (dict(alpha=0.0), "alpha=0.0 is outside"),
    ],
)
def test_config_validation_messages(changes, message):
    with pytest.raises(ValueError, match=message) as info:
        sac.SACConfig(**changes)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name", ["sac", "td3"])
def test_discrete_env_rejected_in_one_line(name):
    config = get_algorithm(name).config(env="CartPole-v1")
    with pytest.raises(ValueError, match=f"{name} needs a continuous") as info:
        get_algorithm(name).make_trainer(config)
    assert "\n" not in str(info.value)


def test_defaults_start_from_rejax_pendulum_settings():
    for config in (sac.SACConfig(), td3.TD3Config()):
        assert config.env == "Pendulum-v1" and config.num_envs == 1
        assert config.utd_ratio == 1.0 and config.hidden == (64, 64)
        assert (config.vector_steps, config.gradient_steps) == (1, 1)
        assert config.buffer_size == 10_000 and config.normalize_obs
    assert sac.SACConfig().learn_alpha and td3.TD3Config().policy_delay == 2


# --- learning (slow) ---------------------------------------------------------------


def _iqm(values: np.ndarray) -> float:
    """Interquartile mean: the mean of the middle half of the sorted values."""
    values = np.sort(values)
    cut = len(values) // 4
    return float(values[cut : len(values) - cut].mean())


def _deterministic_returns(name, config, seeds, episodes, key=0):
    """Each seed's mean return over ``episodes`` deterministic evaluation
    episodes after training, seeds ``split(PRNGKey(key), seeds)`` as one
    vmapped program."""
    algorithm = get_algorithm(name)
    trainer = algorithm.make_trainer(config)
    keys = jax.random.split(jax.random.PRNGKey(key), seeds)
    train = jax.vmap(algorithm.make_train(config), in_axes=(0, None))
    state = jax.jit(train)(keys, config.hyperparams).state

    def score(state, key):
        params = policy_params(state)
        out = evaluate(trainer.policy, params, trainer.env, None, key, episodes, True)
        return out["return"].mean()

    eval_keys = jax.random.split(jax.random.PRNGKey(key + 1000), seeds)
    return np.asarray(jax.jit(jax.vmap(score))(state, eval_keys))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sac", "td3"])
def test_pendulum_eight_seeds_reach_minus_250(name):
    """rejax's Pendulum settings (the defaults): 8 seeds, 2e4 env steps each,
    IQM over seeds of 20 deterministic episodes each."""
    config = get_algorithm(name).config(total_timesteps=20_000)
    returns = _deterministic_returns(name, config, seeds=8, episodes=20)
    assert _iqm(returns) >= -250.0, returns


@pytest.mark.slow
def test_brax_inverted_pendulum_sac_reaches_900():
    pytest.importorskip("brax")
    config = sac.SACConfig(env="brax/inverted_pendulum", total_timesteps=100_000)
    returns = _deterministic_returns("sac", config, seeds=4, episodes=20)
    assert returns.mean() >= 900.0, returns
