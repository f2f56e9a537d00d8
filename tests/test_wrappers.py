"""AutoReset and EpisodeStats on hand-worked sequences."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl import AutoReset, EpisodeStats, make
from ondevice_rl.env.spaces import Box, Discrete
from ondevice_rl.env.types import Environment


class CounterParams(NamedTuple):
    max_steps: jax.Array


class CounterState(NamedTuple):
    time: jax.Array


class Counter(Environment):
    """obs ``[time]``; reward ``time + 1`` (1, 2, 3, ...); action 1 terminates;
    time limit 4."""

    name = "Counter"

    def default_params(self):
        return CounterParams(jnp.int32(4))

    def reset(self, key, params):
        state = CounterState(jnp.int32(0))
        return self.observe(state, params), state

    def transition(self, key, state, action, params):
        reward = (state.time + 1).astype(jnp.float32)
        return state, reward, action == 1

    def observe(self, state, params):
        return state.time.astype(jnp.float32).reshape(1)

    def observation_space(self, params):
        return Box(0.0, 4.0, (1,))

    def action_space(self, params):
        return Discrete(2)


def _run(env, actions, params=None):
    """Steps ``env`` (with ``jit``) through ``actions``; returns the TimeSteps."""
    params = env.default_params() if params is None else params
    _, state = env.reset(jax.random.PRNGKey(0), params)
    step = jax.jit(env.step)
    out = []
    for i, a in enumerate(actions):
        ts = step(jax.random.PRNGKey(i), state, jnp.int32(a), params)
        out.append(jax.device_get(ts))
        state = ts.state
    return out


def test_autoreset_truncation_then_termination():
    steps = _run(AutoReset(Counter()), [0, 0, 0, 0, 0, 1, 0])
    obs = [float(ts.obs[0]) for ts in steps]
    final = [float(ts.info["final_obs"][0]) for ts in steps]
    assert final == [1, 2, 3, 4, 1, 2, 1]
    assert obs == [1, 2, 3, 0, 1, 0, 1]  # reset obs after each episode end
    assert [bool(ts.truncated) for ts in steps] == [0, 0, 0, 1, 0, 0, 0]
    assert [bool(ts.terminated) for ts in steps] == [0, 0, 0, 0, 0, 1, 0]
    assert [float(ts.reward) for ts in steps] == [1, 2, 3, 4, 1, 2, 1]
    assert [int(ts.state.time) for ts in steps] == [1, 2, 3, 0, 1, 0, 1]


def test_autoreset_terminated_and_truncated_together():
    (*_, last) = _run(AutoReset(Counter()), [0, 0, 0, 1])
    assert bool(last.terminated) and bool(last.truncated)
    assert float(last.info["final_obs"][0]) == 4.0 and float(last.obs[0]) == 0.0


def test_episode_stats_totals_and_zeroing():
    steps = _run(EpisodeStats(AutoReset(Counter())), [0, 0, 0, 0, 0, 1, 0])
    done = [bool(ts.info["episode_done"]) for ts in steps]
    assert done == [0, 0, 0, 1, 0, 1, 0]
    assert [float(ts.info["episode_return"]) for ts in steps] == [
        1,
        3,
        6,
        10,
        1,
        3,
        1,
    ]
    assert [int(ts.info["episode_length"]) for ts in steps] == [1, 2, 3, 4, 1, 2, 1]
    # The running totals carried in the state restart at each episode end.
    assert [float(ts.state.episode_return) for ts in steps] == [1, 3, 6, 0, 1, 0, 1]
    assert [int(ts.state.episode_length) for ts in steps] == [1, 2, 3, 0, 1, 0, 1]
    assert "final_obs" in steps[0].info


def test_episode_stats_on_probes():
    env, params = make("Probe-TwoStep-v0")
    steps = _run(EpisodeStats(AutoReset(env)), [0] * 4, params)
    assert [bool(ts.info["episode_done"]) for ts in steps] == [0, 1, 0, 1]
    assert float(steps[1].info["episode_return"]) == 1.0
    assert int(steps[1].info["episode_length"]) == 2
    assert [float(ts.obs[0]) for ts in steps] == [1, 0, 1, 0]

    env, params = make("Probe-Truncation-v0")
    steps = _run(EpisodeStats(AutoReset(env)), [1] * 6, params)
    end = steps[4]
    assert bool(end.truncated) and not bool(end.terminated)
    assert float(end.info["episode_return"]) == 5.0
    assert int(end.info["episode_length"]) == 5
    assert float(steps[5].info["episode_return"]) == 1.0


def test_autoreset_under_vmap_resets_only_finished_envs():
    env = EpisodeStats(AutoReset(Counter()))
    params = env.default_params()
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    _, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    step = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))
    ts = step(keys, state, jnp.array([0, 1, 0]), params)
    ts = step(keys, ts.state, jnp.array([1, 0, 0]), params)
    np.testing.assert_array_equal(ts.terminated, [True, False, False])
    np.testing.assert_array_equal(ts.obs[:, 0], [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(ts.info["final_obs"][:, 0], [2.0, 1.0, 2.0])
    np.testing.assert_array_equal(ts.info["episode_return"], [3.0, 1.0, 3.0])


def test_autoreset_draws_a_fresh_start_state():
    env, params = make("CartPole-v1")
    wrapped = AutoReset(env)
    _, state = env.reset(jax.random.PRNGKey(0), params)
    falling = state._replace(x=jnp.float32(2.4), x_dot=jnp.float32(1.0))
    ts = jax.jit(wrapped.step)(jax.random.PRNGKey(5), falling, 1, params)
    assert bool(ts.terminated)
    assert float(ts.info["final_obs"][0]) > 2.4
    assert int(ts.state.time) == 0
    assert bool(jnp.all(jnp.abs(ts.obs) <= 0.05))


def test_autoreset_keeps_the_reset_key_in_memory_on_cpu_only():
    """On CPU the reset's key sits behind an optimisation barrier (else XLA:CPU
    recomputes its Threefry derivation in every kernel that reads it); a GPU
    program has none."""
    env, params = make("CartPole-v1")
    env = AutoReset(env)
    keys = jax.random.split(jax.random.PRNGKey(0), 8)
    _, states = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    actions = jnp.zeros(8, jnp.int32)

    def step(keys, states, actions):
        return jax.vmap(env.step, in_axes=(0, 0, 0, None))(
            keys, states, actions, params
        )

    args = (keys, states, actions)
    cpu = jax.jit(step).lower(*args).as_text()
    cuda = jax.export.export(jax.jit(step), platforms=["cuda"])(*args).mlir_module()
    assert "optimization_barrier" in cpu
    assert "optimization_barrier" not in cuda
