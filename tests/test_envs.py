"""Registry, the env protocol under jit/vmap, reset distributions and probes."""

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ondevice_rl import envs, make
from ondevice_rl.checks.reference import compare_spaces, reset_distribution
from ondevice_rl.env.spaces import Discrete
from ondevice_rl.envs.cartpole import CartPole, CartPoleState

GYM_IDS = [
    "Acrobot-v1",
    "CartPole-v1",
    "MountainCar-v0",
    "MountainCarContinuous-v0",
    "Pendulum-v1",
]
PROBE_IDS = ["Probe-OneStep-v0", "Probe-Truncation-v0", "Probe-TwoStep-v0"]
ALL_IDS = GYM_IDS + PROBE_IDS


def test_registry_names():
    assert set(ALL_IDS) <= set(envs.names())
    assert envs.names() == sorted(envs.names())
    for name in ALL_IDS:
        env, params = make(name)
        assert env.name == name


@pytest.mark.parametrize(
    "typo, suggestion",
    [
        ("CartPole-v0", "CartPole-v1"),
        ("pendulum-v1", "Pendulum-v1"),
        ("MountainCar-v1", "MountainCar-v0"),
    ],
)
def test_unknown_name_suggests_close_matches(typo, suggestion):
    with pytest.raises(KeyError) as info:
        make(typo)
    message = str(info.value)
    assert repr(typo) in message and "Did you mean" in message
    assert suggestion in message.split("Registered")[0]


def test_unknown_name_without_close_match():
    with pytest.raises(KeyError, match="Registered: ") as info:
        make("zzzzzzzz")
    assert "Did you mean" not in str(info.value)


@pytest.mark.parametrize("name", GYM_IDS)
def test_time_limit_matches_gymnasium(name):
    _, params = make(name)
    assert int(params.max_steps) == gymnasium.spec(name).max_episode_steps


@pytest.mark.parametrize("name", ALL_IDS)
def test_params_and_state_dtypes(name):
    env, params = make(name)
    for field, leaf in params._asdict().items():
        want = jnp.int32 if field == "max_steps" else jnp.float32
        assert jnp.asarray(leaf).dtype == want, field
        assert jnp.ndim(leaf) == 0, field
    _, state = env.reset(jax.random.PRNGKey(0), params)
    assert state.time.dtype == jnp.int32 and int(state.time) == 0
    for field, leaf in state._asdict().items():
        if field != "time":
            assert leaf.dtype == jnp.float32, field


#: Batched under jit and vmap here, params batched too; every env's steps under
#: jit(vmap) (no reset inside, truncation, spaces) are also
#: tests/test_env_properties.py's, so these repeat CartPole-v1's (discrete
#: actions) and Pendulum-v1's (Box actions) path here: under ``slow``.
BATCHED_SLOW = {"Acrobot-v1", "MountainCar-v0", "MountainCarContinuous-v0"}
BATCHED_SLOW |= set(PROBE_IDS)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.slow) if n in BATCHED_SLOW else n
        for n in ALL_IDS
    ],
)
def test_jit_and_vmap_batch_of_8(name):
    env, params = make(name)
    obs_space = env.observation_space(params)
    act_space = env.action_space(params)
    keys = jax.random.split(jax.random.PRNGKey(0), 8)
    obs, state = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(keys, params)
    assert obs.shape == (8, *obs_space.shape) and obs.dtype == jnp.float32
    assert bool(jax.vmap(obs_space.contains)(obs).all())
    actions = jax.vmap(act_space.sample)(keys)
    assert actions.shape == (8, *act_space.shape)
    step = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))
    for _ in range(3):
        ts = step(keys, state, actions, params)
        state = ts.state
    assert ts.obs.shape == obs.shape and ts.obs.dtype == jnp.float32
    assert ts.reward.shape == (8,) and ts.reward.dtype == jnp.float32
    assert ts.terminated.shape == (8,) and ts.terminated.dtype == jnp.bool_
    assert ts.truncated.shape == (8,) and ts.truncated.dtype == jnp.bool_
    assert bool(jnp.all(jnp.isfinite(ts.obs)))
    # A population: one params per environment, vmapped as well.
    population = jax.tree.map(lambda x: jnp.stack([x] * 8), params)
    ts_pop = jax.jit(jax.vmap(env.step))(keys, state, actions, population)
    assert ts_pop.obs.shape == obs.shape


def test_single_env_step_matches_batched():
    env, params = make("Acrobot-v1")
    keys = jax.random.split(jax.random.PRNGKey(3), 8)
    obs, state = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(keys, params)
    actions = jnp.arange(8) % 3
    batched = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))(
        keys, state, actions, params
    )
    for i in (0, 5):
        one = jax.tree.map(lambda x, i=i: x[i], state)
        single = jax.jit(env.step)(keys[i], one, actions[i], params)
        np.testing.assert_allclose(single.obs, batched.obs[i], rtol=1e-6, atol=1e-6)


def test_physics_params_are_traced():
    """Changing a param leaf changes the dynamics without recompiling."""
    env, params = make("Pendulum-v1")
    _, state = env.reset(jax.random.PRNGKey(0), params)
    step = jax.jit(env.step)
    a = jnp.array([0.5])
    low = step(jax.random.PRNGKey(1), state, a, params._replace(gravity=jnp.float32(1)))
    high = step(jax.random.PRNGKey(1), state, a, params)
    assert not np.allclose(low.obs, high.obs)
    assert step._cache_size() == 1


@pytest.mark.parametrize("name", GYM_IDS)
def test_reset_distribution_matches_gymnasium(name):
    """One distribution by KS and Rosenbaum's tests (n = 1000 each)."""
    env, params = make(name)
    result = reset_distribution(env, params, gymnasium.make(name), num_samples=1000)
    assert result.ok, result.detail


class WiderReset(CartPole):
    def reset(self, key, params):
        x = jax.random.uniform(key, (4,), jnp.float32, -0.055, 0.055)
        state = CartPoleState(*x, jnp.int32(0))
        return self.observe(state, params), state


def test_a_reset_ten_percent_wider_is_caught():
    env = WiderReset()
    reference = gymnasium.make("CartPole-v1")
    result = reset_distribution(env, env.default_params(), reference, num_samples=1000)
    assert not result.ok and "different distributions" in result.detail


@pytest.mark.parametrize("name", GYM_IDS)
def test_spaces_match_gymnasium(name):
    env, params = make(name)
    result = compare_spaces(env, params, gymnasium.make(name))
    assert result.ok, result.detail


def test_other_spaces_are_reported():
    env, params = make("Acrobot-v1")
    result = compare_spaces(env, params, gymnasium.make("CartPole-v1"))
    assert not result.ok
    assert result.detail == "action space is Discrete(3), the reference's Discrete(2)"


def test_acrobot_torque_noise_uses_the_key():
    env, params = make("Acrobot-v1", stochastic_step=True)
    assert env.stochastic_step
    assert not make("Acrobot-v1")[0].stochastic_step
    noisy = params._replace(torque_noise_max=jnp.float32(0.5))
    _, state = env.reset(jax.random.PRNGKey(0), noisy)
    step = jax.jit(env.step)  # one program for the four steps
    a = step(jax.random.PRNGKey(1), state, 2, noisy).obs
    b = step(jax.random.PRNGKey(2), state, 2, noisy).obs
    c = step(jax.random.PRNGKey(1), state, 2, params).obs
    d = step(jax.random.PRNGKey(2), state, 2, params).obs
    assert not np.allclose(a, b)
    np.testing.assert_array_equal(c, d)


# --- probes ---


def _rollout(name, steps):
    env, params = make(name)
    obs, state = env.reset(jax.random.PRNGKey(0), params)
    out = [np.asarray(obs)]
    for _ in range(steps):
        ts = env.step(jax.random.PRNGKey(1), state, 0, params)
        out.append(
            (
                np.asarray(ts.obs),
                float(ts.reward),
                bool(ts.terminated),
                bool(ts.truncated),
            )
        )
        state = ts.state
    return env, params, out


def test_probe_one_step():
    env, params, (obs0, step1) = _rollout("Probe-OneStep-v0", 1)
    np.testing.assert_array_equal(obs0, [1.0])
    assert step1[1:] == (1.0, True, False)
    assert env.action_space(params) == Discrete(2)
    assert int(params.max_steps) >= 1000


def test_probe_two_step():
    env, params, (obs0, step1, step2) = _rollout("Probe-TwoStep-v0", 2)
    np.testing.assert_array_equal(obs0, [0.0])
    np.testing.assert_array_equal(step1[0], [1.0])
    assert step1[1:] == (0.0, False, False)
    assert step2[1:] == (1.0, True, False)
    assert env.action_space(params) == Discrete(2)
    assert int(params.max_steps) >= 1000


def test_probe_truncation():
    env, params, (obs0, *steps) = _rollout("Probe-Truncation-v0", 5)
    assert int(params.max_steps) == 5
    np.testing.assert_array_equal(obs0, [1.0])
    for i, (obs, reward, terminated, truncated) in enumerate(steps):
        np.testing.assert_array_equal(obs, [1.0])
        assert (reward, terminated, truncated) == (1.0, False, i == 4)
    assert env.action_space(params) == Discrete(2)
