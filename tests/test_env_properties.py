"""Properties of every registered environment (hypothesis): for random keys,
actions and in-range params, under jit and vmap, observations are finite and
of the declared shape and dtype, rewards finite, flags boolean; ``step``
never resets and truncates exactly at ``max_steps``."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ondevice_rl import envs
from ondevice_rl.ranges import NON_NEGATIVE, POSITIVE
from ondevice_rl.spaces import Discrete

STEPS, BATCH = 24, 4


def _available():
    names = []
    for name in envs.names():
        try:
            envs.make(name)
        except Exception:  # an adapter whose backend is not installed
            continue
        names.append(name)
    return names


@functools.cache
def _program(name):
    """``jit(vmap(episode))``: ``STEPS`` steps from a reset, params traced."""
    env, _ = envs.make(name)
    space = env.action_space(env.default_params())

    def random_action(key):
        if isinstance(space, Discrete):
            return jax.random.randint(key, (), 0, space.n)
        low, high = jnp.asarray(space.low), jnp.asarray(space.high)
        return jax.random.uniform(key, space.shape, minval=low, maxval=high)

    def episode(key, params):
        reset_key, key = jax.random.split(key)
        obs, state = env.reset(reset_key, params)

        def step(state, key):
            act_key, step_key = jax.random.split(key)
            ts = env.step(step_key, state, random_action(act_key), params)
            # The protocol: step never resets (time counts on), and truncates
            # exactly at the time limit.
            time = ts.state.time
            ok = (time == state.time + 1) & (ts.truncated == (time >= params.max_steps))
            # Keep stepping a finished episode from a fresh reset, as a learner would.
            done = ts.terminated | ts.truncated
            _, fresh = env.reset(step_key, params)
            state = jax.tree.map(lambda a, b: jnp.where(done, a, b), fresh, ts.state)
            return state, (ts.obs, ts.reward, ts.terminated, ts.truncated, ok)

        _, out = jax.lax.scan(step, state, jax.random.split(key, STEPS))
        return obs, out

    return jax.jit(jax.vmap(episode, in_axes=(0, None)))


def _params(name, scales, limit_fraction):
    """The defaults, positive physics scaled by ``scales`` (in [0.5, 2]), the
    time limit cut to a fraction; checked by the env itself."""
    env, defaults = envs.make(name)
    if not hasattr(defaults, "_fields"):
        return defaults
    values = {}
    for i, field in enumerate(defaults._fields):
        value = getattr(defaults, field)
        if field == "max_steps":
            values[field] = max(1, int(int(value) * limit_fraction))
        elif np.ndim(value) == 0 and env.PARAM_RANGES.get(field) in (
            POSITIVE,
            NON_NEGATIVE,
        ):
            values[field] = float(value) * scales[i % len(scales)]
    checked = env.check_params(values)
    return defaults._replace(
        **{
            k: jnp.asarray(v, jnp.asarray(getattr(defaults, k)).dtype)
            for k, v in checked.items()
        }
    )


#: Examples per environment: the native ports get the most, the 25 gymnax
#: adapters fewer (each compiles a program of its own; their dynamics are
#: gymnax's). brax envs compile for 25 s (inverted_pendulum) to minutes on
#: CPU: tests/test_adapters.py steps one under jit and vmap instead.
EXAMPLES = {"gymnax/": 3}


def _tested(name):
    return not name.startswith(("brax/", "mjx/"))


def _examples(name):
    return next((n for p, n in EXAMPLES.items() if name.startswith(p)), 8)


@pytest.mark.parametrize("name", [n for n in _available() if _tested(n)])
def test_steps_are_well_formed(name):
    @settings(max_examples=_examples(name), deadline=None)
    @given(
        seed=st.integers(0, 2**32 - 1),
        scales=st.lists(st.floats(0.5, 2.0), min_size=1, max_size=6),
        limit_fraction=st.floats(0.01, 1.0),
    )
    def check(seed, scales, limit_fraction):
        _check(name, seed, scales, limit_fraction)

    check()


def _check(name, seed, scales, limit_fraction):
    env, defaults = envs.make(name)
    params = _params(name, scales, limit_fraction)
    keys = jax.random.split(jax.random.key(seed), BATCH)
    first_obs, (obs, reward, terminated, truncated, ok) = _program(name)(keys, params)
    assert np.all(ok), "step reset by itself or truncated off the time limit"
    space = env.observation_space(defaults)
    assert first_obs.shape == (BATCH, *space.shape)
    assert obs.shape == (BATCH, STEPS, *space.shape)
    assert obs.dtype == jnp.float32 and first_obs.dtype == jnp.float32
    assert np.all(np.isfinite(obs)) and np.all(np.isfinite(first_obs))
    assert reward.shape == (BATCH, STEPS) and reward.dtype == jnp.float32
    assert np.all(np.isfinite(reward))
    assert terminated.dtype == jnp.bool_ and truncated.dtype == jnp.bool_
    assert _program(name)._cache_size() == 1  # new params never recompile
