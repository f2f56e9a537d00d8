"""Resets for the ended episodes only (``costly_reset``): the same numbers as
the select, bit for bit, for one env, a batch, a population and batched
params; the program computes a chunk of resets per round, not the batch's."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from suite_flags import PRODUCT_EMITTERS

from ondevice_rl import AutoReset, EpisodeStats, make
from ondevice_rl.env.reset_where import chunk_size
from ondevice_rl.envs.cartpole import CartPole

B, T = 16, 60


class CostlyCartPole(CartPole):
    costly_reset = True


def _rollout(env, params, params_axis=None):
    """``T`` random steps of ``B`` envs under ``jit(vmap)``: every obs, state
    and episode total, ``[T, B, ...]``."""
    wrapped = EpisodeStats(AutoReset(env))

    def run(key, params):
        keys = jax.random.split(key, B)
        _, state = jax.vmap(wrapped.reset, in_axes=(0, params_axis))(keys, params)
        step = jax.vmap(wrapped.step, in_axes=(0, 0, 0, params_axis))

        def body(state, key):
            k_act, k_env = jax.random.split(key)
            action = jax.random.randint(k_act, (B,), 0, 2)
            ts = step(jax.random.split(k_env, B), state, action, params)
            return ts.state, (ts.obs, ts.state, ts.info["episode_return"], ts.reward)

        return jax.lax.scan(body, state, jax.random.split(key, T))[1]

    return run


def _run(fn, *args):
    """``jax.jit(fn)(*args)`` compiled with the emitters users get: the
    suite's elemental emitters round the two rollouts' resets differently
    (by one ulp) where XLA's default does not."""
    lowered = jax.jit(fn).lower(*args)
    return lowered.compile(compiler_options=PRODUCT_EMITTERS)(*args)


@pytest.fixture(scope="module")
def short_episodes():
    """CartPole params whose time limit (5 steps) ends many episodes at once,
    the chunk of resets overflows, and the loop takes several rounds."""
    _, params = make("CartPole-v1")
    return params._replace(max_steps=jnp.int32(5))


def test_costly_reset_gives_the_selects_numbers(short_episodes):
    key = jax.random.key(3)
    select = _rollout(CartPole(), short_episodes)
    lazy = _rollout(CostlyCartPole(), short_episodes)
    both = _run(lambda k, p: (lazy(k, p), select(k, p)), key, short_episodes)
    jax.tree.map(np.testing.assert_array_equal, *both)
    assert np.sum(both[1][2] > 0) > T  # many episodes ended, B of them at once


def _limit_only(params):
    """vmap axes for params batched in their time limit only."""
    return type(params)(*[None] * (len(params) - 1), 0)


def test_costly_reset_in_a_population_with_batched_params(short_episodes):
    """An outer vmap over 3 members, each with its own time limit; and the
    params batched over the envs themselves (the gather path)."""
    assert short_episodes._fields[-1] == "max_steps"
    axes = _limit_only(short_episodes)
    members = short_episodes._replace(max_steps=jnp.array([3, 5, 200], jnp.int32))
    keys = jax.random.split(jax.random.key(4), 3)
    per_env = short_episodes._replace(max_steps=3 + jnp.arange(B, dtype=jnp.int32) % 4)

    def runs(env):
        population = jax.vmap(_rollout(env, short_episodes), in_axes=(0, axes))
        each_env = _rollout(env, per_env, params_axis=axes)
        return lambda: (population(keys, members), each_env(keys[0], per_env))

    lazy, select = runs(CostlyCartPole()), runs(CartPole())
    both = _run(lambda: (lazy(), select()))  # one program: one compile
    jax.tree.map(np.testing.assert_array_equal, *both)


def test_one_env_takes_a_real_branch_and_a_batch_a_chunked_loop(short_episodes):
    env = AutoReset(CostlyCartPole())
    key = jax.random.key(0)
    _, state = env.reset(key, short_episodes)
    one = jax.make_jaxpr(env.step)(key, state, 1, short_episodes)
    assert "cond" in str(one) and "while" not in str(one)
    keys = jax.random.split(key, B)
    states = jax.vmap(env.reset, in_axes=(0, None))(keys, short_episodes)[1]
    actions = jnp.ones(B, jnp.int32)
    many = jax.make_jaxpr(jax.vmap(env.step, in_axes=(0, 0, 0, None)))(
        keys, states, actions, short_episodes
    )
    text = str(many)
    assert "while" in text
    # The loop's reset draws the chunk's start states ([chunk, 4]), not B.
    assert f"f32[{chunk_size(B)},4]" in text


def test_costly_reset_lowers_for_gpu(short_episodes):
    """The loop (gather, while, scatter) is plain XLA: it exports for CUDA."""
    env = AutoReset(CostlyCartPole())
    keys = jax.random.split(jax.random.key(0), B)
    states = jax.vmap(env.reset, in_axes=(0, None))(keys, short_episodes)[1]
    step = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))
    actions = jnp.ones(B, jnp.int32)
    exported = jax.export.export(step, platforms=["cuda"])(
        keys, states, actions, short_episodes
    )
    assert "stablehlo.while" in exported.mlir_module()
