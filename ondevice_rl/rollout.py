"""Collect ``T`` steps from ``B`` environments in one ``lax.scan``.

The environment is unbatched; it is vmapped here over the batch axis. Wrap it
as ``EpisodeStats(AutoReset(env))`` so episodes restart inside the scan and
finished-episode statistics come out with the transitions.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import jax

from ondevice_rl.networks import PolicyOutput, log_prob, sample_action
from ondevice_rl.types import Environment


class RolloutState(NamedTuple):
    """Where the environments are between rollouts."""

    env_state: Any  # batched env state, leaves [B, ...]
    obs: jax.Array  # [B, *obs_shape]
    key: jax.Array


class Transition(NamedTuple):
    """One step of ``B`` environments; stacked by the scan into ``[T, B, ...]``."""

    obs: jax.Array  # [B, *obs_shape] observation the action was taken in
    action: jax.Array  # [B] int32 or [B, A] float32
    log_prob: jax.Array  # [B]
    value: jax.Array  # [B] critic value of obs
    reward: jax.Array  # [B]
    terminated: jax.Array  # [B] bool
    truncated: jax.Array  # [B] bool
    final_obs: jax.Array  # [B, *obs_shape] next observation before any reset
    episode_done: jax.Array  # [B] bool, an episode ended at this step
    episode_return: jax.Array  # [B] its return (valid where episode_done)
    episode_length: jax.Array  # [B] its length (valid where episode_done)


PolicyFn = Callable[[Any, jax.Array], PolicyOutput]


def batch_reset(
    env: Environment, env_params: Any, key: jax.Array, num_envs: int
) -> RolloutState:
    """Resets ``num_envs`` environments: obs ``[B, *obs_shape]``."""
    key, reset_key = jax.random.split(key)
    keys = jax.random.split(reset_key, num_envs)
    obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(keys, env_params)
    return RolloutState(env_state, obs, key)


def rollout(
    env: Environment,
    env_params: Any,
    policy_fn: PolicyFn,
    policy_params: Any,
    state: RolloutState,
    num_steps: int,
    action_transform: Callable[[jax.Array], jax.Array] = lambda a: a,
) -> tuple[RolloutState, Transition]:
    """Runs ``num_steps`` steps; returns the new state and ``[T, B, ...]`` data.

    ``action_transform`` maps the sampled action to what the env receives (for
    example clipping to the action space); the sampled action is what is
    stored and scored.
    """
    num_envs = state.obs.shape[0]
    step_env = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def one_step(carry: RolloutState, _) -> tuple[RolloutState, Transition]:
        env_state, obs, key = carry
        # One split per step for the whole batch; per-env keys only for the
        # environments' own randomness (resets).
        key, act_key, env_key = jax.random.split(key, 3)
        pi = policy_fn(policy_params, obs)
        action = sample_action(act_key, pi)
        ts = step_env(
            jax.random.split(env_key, num_envs),
            env_state,
            action_transform(action),
            env_params,
        )
        info = ts.info
        transition = Transition(
            obs=obs,
            action=action,
            log_prob=log_prob(pi, action),
            value=pi.value,
            reward=ts.reward,
            terminated=ts.terminated,
            truncated=ts.truncated,
            final_obs=info["final_obs"],
            episode_done=info["episode_done"],
            episode_return=info["episode_return"],
            episode_length=info["episode_length"],
        )
        return RolloutState(ts.state, ts.obs, key), transition

    return jax.lax.scan(one_step, state, None, length=num_steps)
