"""gymnax and brax adapters: same dynamics as our ports, our time limit, no reset."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ondevice_rl import envs
from ondevice_rl.envs.cartpole import CartPoleState
from ondevice_rl.rollout import batch_reset
from ondevice_rl.wrappers import AutoReset, EpisodeStats


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
    axes = (0, 0, 0, None)
    want = jax.vmap(ours.step, in_axes=axes)(keys, ours_state, actions, params)
    got = jax.vmap(adapter.step, in_axes=axes)(keys, g, actions, gparams)
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


@pytest.mark.parametrize("gymnax_id", envs.GYMNAX_IDS)
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
    from ondevice_rl.envs.brax_adapter import BraxAdapter

    env = BraxAdapter("inverted_pendulum", max_steps=5)
    params = env.default_params()
    obs, state = env.reset(jax.random.PRNGKey(0), params)
    assert obs.shape == env.observation_space(params).shape
    action = jnp.zeros(env.action_space(params).shape)
    step = jax.jit(env.step)
    for t in range(5):
        ts = step(jax.random.PRNGKey(t), state, action, params)
        state = ts.state
    assert bool(ts.truncated) and ts.reward.shape == ()
    assert ts.obs.shape == obs.shape


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
