"""gymnax and brax adapters: same dynamics as our ports, our time limit, no
reset; the message for a missing backend (mjx's too)."""

import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ondevice_rl import envs
from ondevice_rl.env.spaces import Box
from ondevice_rl.env.wrappers import AutoReset, EpisodeStats
from ondevice_rl.envs.cartpole import CartPoleState
from ondevice_rl.rollout import batch_reset


def _random_states(key, n):
    """``n`` CartPole states spread over the non-terminal region."""
    lim = jnp.array([2.3, 2.0, 0.2, 2.0])
    x = jax.random.uniform(key, (n, 4), minval=-lim, maxval=lim)
    time = jax.random.randint(jax.random.fold_in(key, 1), (n,), 0, 500)
    return x, time


def test_gymnax_cartpole_matches_our_port():
    ours, params = envs.make("CartPole-v1")
    adapter, gparams = envs.make("gymnax/CartPole-v1")
    assert int(gparams.max_steps) == int(params.max_steps) == 500
    assert adapter.action_space(gparams).n == 2
    assert adapter.observation_space(gparams).shape == (4,)

    x, time = _random_states(jax.random.PRNGKey(0), 512)
    _, g0 = adapter.reset(jax.random.PRNGKey(1), gparams)
    ours_state = CartPoleState(x[:, 0], x[:, 1], x[:, 2], x[:, 3], time)
    g = g0.replace(
        x=x[:, 0], x_dot=x[:, 1], theta=x[:, 2], theta_dot=x[:, 3], time=time
    )
    keys = jax.random.split(jax.random.PRNGKey(2), 512)
    actions = jnp.arange(512, dtype=jnp.int32) % 2
    axes = (0, 0, 0, None)  # one program each, not op by op
    want = jax.jit(jax.vmap(ours.step, in_axes=axes))(keys, ours_state, actions, params)
    got = jax.jit(jax.vmap(adapter.step, in_axes=axes))(keys, g, actions, gparams)
    np.testing.assert_allclose(got.obs, want.obs, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got.reward, want.reward)
    np.testing.assert_array_equal(got.terminated, want.terminated)
    np.testing.assert_array_equal(got.truncated, want.truncated)
    np.testing.assert_array_equal(got.state.time, want.state.time)
    assert 0 < int(want.terminated.sum()) < 512  # both outcomes exercised


def test_gymnax_step_does_not_reset_and_truncates_at_max_steps():
    adapter, params = envs.make("gymnax/CartPole-v1")
    _, state = adapter.reset(jax.random.PRNGKey(0), params)
    # Falling pole: terminated, and the observation is past the threshold.
    falling = state.replace(theta=jnp.float32(0.25))
    ts = adapter.step(jax.random.PRNGKey(1), falling, jnp.int32(0), params)
    assert bool(ts.terminated) and not bool(ts.truncated)
    assert float(ts.obs[2]) > 0.2
    # Last step of the time limit: truncated only; our limit, not gymnax's.
    last = state.replace(time=jnp.int32(499))
    ts = adapter.step(jax.random.PRNGKey(1), last, jnp.int32(0), params)
    assert bool(ts.truncated) and not bool(ts.terminated)
    short = params._replace(max_steps=jnp.int32(10))
    ts = adapter.step(jax.random.PRNGKey(1), state.replace(time=9), 0, short)
    assert bool(ts.truncated)


#: Scanned with auto-reset here; every gymnax env is stepped under jit and vmap
#: by tests/test_env_properties.py, but for the classic-control ones (there
#: under ``slow``: stepped here) and MinAtar's (Breakout here).
SCANNED = (
    "CartPole-v1",
    "Acrobot-v1",
    "MountainCar-v0",
    "MountainCarContinuous-v0",
    "Pendulum-v1",
    "Breakout-MinAtar",
    # The same scan as CartPole-v1's; FrozenLake's steps (jit, vmap): its
    # test_env_properties.py case.
    pytest.param("FrozenLake-misc", marks=pytest.mark.slow),
)


def test_every_gymnax_env_is_registered_or_left_out_with_a_reason():
    import gymnax

    ours = set(envs.GYMNAX_IDS) | set(envs.GYMNAX_LEFT_OUT)
    assert ours == set(gymnax.registered_envs)
    listed = [n for n in envs.names() if n.startswith("gymnax/")]
    assert sorted(listed) == sorted(f"gymnax/{i}" for i in envs.GYMNAX_IDS)
    for gymnax_id, why in envs.GYMNAX_LEFT_OUT.items():
        with pytest.raises(KeyError, match="left out") as info:
            envs.make(f"gymnax/{gymnax_id}")
        assert why in str(info.value) and "\n" not in str(info.value)


def test_every_gymnax_env_has_float32_box_observations():
    """Spaces translated; stepping every env under jit and vmap (no reset
    inside ``step``, truncation exactly at ``max_steps``) is
    tests/test_env_properties.py's job."""
    for gymnax_id in envs.GYMNAX_IDS:
        env, params = envs.make(f"gymnax/{gymnax_id}")
        space = env.observation_space(params)
        assert isinstance(space, Box) and space.dtype == jnp.float32, gymnax_id
        assert int(params.max_steps) >= 1


def test_minatar_observations_are_float_images():
    env, params = envs.make("gymnax/Breakout-MinAtar")
    assert env.observation_space(params).shape == (10, 10, 4)
    obs, _ = env.reset(jax.random.PRNGKey(0), params)
    assert obs.dtype == jnp.float32 and set(np.unique(obs)) <= {0.0, 1.0}
    env, params = envs.make("gymnax/FrozenLake-misc")  # Discrete obs: one-hot
    obs, _ = env.reset(jax.random.PRNGKey(0), params)
    assert obs.shape == env.observation_space(params).shape and obs.sum() == 1


def test_unknown_names_give_one_line():
    with pytest.raises(KeyError) as info:
        envs.make("gymnax/breakout")
    message = info.value.args[0]
    assert "gymnax/Breakout-MinAtar" in message and "\n" not in message
    with pytest.raises(KeyError, match="Did you mean: gymnax/SpaceInvaders"):
        envs.make("gymnax/SpaceInvader-MinAtar")


@pytest.mark.parametrize(
    "module, name, extra",
    [("brax", "brax/hopper", "brax"), ("mujoco_playground", "mjx/CheetahRun", "mjx")],
)
def test_missing_backend_says_what_to_install(module, name, extra):
    code = (
        f"import sys; sys.modules[{module!r}] = None\n"
        "from ondevice_rl import envs\n"
        f"try:\n    envs.make({name!r})\n"
        "except KeyError as e:\n    print(e.args[0])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip().endswith(f"pip install 'ondevice_rl[{extra}]'"), out
    assert len(out.strip().splitlines()) == 1


@pytest.mark.parametrize("gymnax_id", SCANNED)
def test_gymnax_adapters_scan_with_auto_reset(gymnax_id):
    env, params = envs.make(f"gymnax/{gymnax_id}")
    env = EpisodeStats(AutoReset(env))
    space = env.action_space(params)
    state = batch_reset(env, params, jax.random.PRNGKey(0), 8)

    def body(carry, key):
        env_state, _ = carry
        a_key, s_key = jax.random.split(key)
        actions = jax.vmap(space.sample)(jax.random.split(a_key, 8))
        ts = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
            jax.random.split(s_key, 8), env_state, actions, params
        )
        return (ts.state, ts.obs), ts.reward

    keys = jax.random.split(jax.random.PRNGKey(1), 300)
    (_, obs), rewards = jax.jit(lambda c: jax.lax.scan(body, c, keys))(
        (state.env_state, state.obs)
    )
    assert rewards.shape == (300, 8) and rewards.dtype == jnp.float32
    assert obs.shape == (8, *env.observation_space(params).shape)
    assert bool(jnp.isfinite(rewards).all())


def test_brax_adapter():
    pytest.importorskip("brax")
    env, params = envs.make("brax/inverted_pendulum")
    assert int(params.max_steps) == 1000
    params = params._replace(max_steps=jnp.int32(5))
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    obs, state = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(keys, params)
    assert obs.shape == (2, *env.observation_space(params).shape)
    assert obs.dtype == jnp.float32
    actions = jnp.zeros((2, *env.action_space(params).shape))
    step = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))
    for _ in range(5):
        assert not bool(jnp.any(state.time >= 5))
        ts = step(keys, state, actions, params)
        state = ts.state
    assert bool(ts.truncated.all()) and ts.reward.shape == (2,)
    assert ts.obs.shape == obs.shape and bool(jnp.isfinite(ts.obs).all())
    assert not bool(ts.terminated.any())  # upright, no force: still balanced
    np.testing.assert_array_equal(state.time, 5)  # no reset inside step


@pytest.mark.parametrize("gymnax_id", envs.GYMNAX_IDS)
def test_gymnax_step_key_use_matches_stochastic_step(gymnax_id):
    # AutoReset reuses the step key for the reset when stochastic_step is False:
    # only sound if the dynamics ignore the key.
    env, params = envs.make(f"gymnax/{gymnax_id}")
    if env.stochastic_step:
        pytest.skip("declared stochastic: AutoReset splits the key")
    _, state = env.reset(jax.random.PRNGKey(0), params)
    action = env.action_space(params).sample(jax.random.PRNGKey(1))
    a = env.step(jax.random.PRNGKey(2), state, action, params)
    b = env.step(jax.random.PRNGKey(3), state, action, params)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(x, y)
