"""Collect ``T`` steps from ``B`` environments in one ``lax.scan``.

The environment is unbatched; it is vmapped here over the batch axis. Wrap it
as ``EpisodeStats(AutoReset(env))`` so episodes restart inside the scan and
finished-episode statistics come out beside the transitions.

The learner chooses actions through ``act(params, obs, key) -> (action,
env_action, extras)``: ``action`` is what it stores and learns from,
``env_action`` what the environment receives (a clipped Gaussian sample, say)
and ``extras`` any per-step pytree it wants kept (an actor-critic's log-prob
and value; nothing, ``()``, for a Q-learner). A policy with memory uses
``rollout(..., memory=True)`` and ``act(params, obs, key, agent, first) ->
(action, env_action, extras, agent)``: ``agent`` is its carry (kept in
``RolloutState.agent``), ``first`` ``[B]`` marks observations that start an
episode, where the carry must start afresh.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.env.types import Environment
from ondevice_rl.scans import stacked_scan


class RolloutState(NamedTuple):
    """Where the environments are between rollouts."""

    env_state: Any  # batched env state, leaves [B, ...]
    obs: Any  # [B, *obs_shape] (or a pytree of such leaves)
    key: jax.Array
    first: jax.Array = ()  # [B] bool, obs starts an episode (memory only)
    agent: Any = ()  # the policy's carry, leaves [B, ...] (memory only)


class Transition(NamedTuple):
    """One step of ``B`` environments; stacked by the scan into ``[T, B, ...]``."""

    obs: Any  # [B, *obs_shape] observation the action was taken in (a pytree
    # for pytree observations; an action mask, if any, inside it)
    action: jax.Array  # [B] int32 or [B, A] float32
    reward: jax.Array  # [B]
    terminated: jax.Array  # [B] bool
    truncated: jax.Array  # [B] bool
    final_obs: Any  # [B, *obs_shape] next observation before any reset
    extras: Any  # the learner's per-step data, leaves [B, ...]


class EpisodeInfo(NamedTuple):
    """Episodes that ended at one step, ``[B]`` each (``[T, B]`` stacked)."""

    done: jax.Array  # bool, an episode ended here
    returns: jax.Array  # its return (valid where done)
    lengths: jax.Array  # its length (valid where done)


ActFn = Callable[[Any, jax.Array, jax.Array], tuple[jax.Array, jax.Array, Any]]


def batch_reset(
    env: Environment, env_params: Any, key: jax.Array, num_envs: int
) -> RolloutState:
    """Resets ``num_envs`` environments: obs ``[B, *obs_shape]``; ``agent``
    ``()`` and ``first`` all true (set ``agent`` for a policy with memory)."""
    key, reset_key = jax.random.split(key)
    keys = jax.random.split(reset_key, num_envs)
    obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(keys, env_params)
    return RolloutState(env_state, obs, key, jnp.ones((num_envs,), jnp.bool_))


def rollout(
    env: Environment,
    env_params: Any,
    act: ActFn,
    params: Any,
    state: RolloutState,
    num_steps: int,
    memory: bool = False,
) -> tuple[RolloutState, Transition, EpisodeInfo]:
    """Runs ``num_steps`` steps of ``B`` envs with ``act(params, obs [B, ...],
    key)`` (with ``memory``: ``act(params, obs, key, agent, first)``, see the
    module docstring); returns the new state, ``[T, B, ...]`` transitions and
    ``[T, B]`` episode ends."""
    num_envs = jax.tree.leaves(state.obs)[0].shape[0]
    step_env = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def one_step(carry: RolloutState):
        env_state, obs, key, first, agent = carry
        # One split per step for the whole batch; per-env keys only for the
        # environments' own randomness (resets).
        key, act_key, env_key = jax.random.split(key, 3)
        if memory:
            action, env_action, extras, agent = act(params, obs, act_key, agent, first)
        else:
            action, env_action, extras = act(params, obs, act_key)
        ts = step_env(
            jax.random.split(env_key, num_envs), env_state, env_action, env_params
        )
        info = ts.info
        transition = Transition(
            obs=obs,
            action=action,
            reward=ts.reward,
            terminated=ts.terminated,
            truncated=ts.truncated,
            final_obs=info["final_obs"],
            extras=extras,
        )
        episodes = EpisodeInfo(
            info["episode_done"], info["episode_return"], info["episode_length"]
        )
        if memory:
            first = ts.terminated | ts.truncated
        next_state = RolloutState(ts.state, ts.obs, key, first, agent)
        return next_state, (transition, episodes)

    with jax.named_scope("rollout"):
        state, (transitions, episodes) = stacked_scan(one_step, state, num_steps)
    return state, transitions, episodes
