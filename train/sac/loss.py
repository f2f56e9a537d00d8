"""SAC's losses on one sampled batch, on raveled parameters (``Nets``).

Sequences are ``[n, M]`` (time-major, as ``ReplayBuffer.sample`` returns
them); the loss terms read their first step, the soft n-step targets
bootstrap from each step's ``final_obs``. Unit actions in ``[-1, 1]^A``.
"""

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.nn.continuous_control import squashed_sample
from ondevice_rl.rollout import Transition
from ondevice_rl.train.kit.off_policy import Model, Nets, n_step_targets


class SACStats(NamedTuple):
    """Scalars of one gradient step (0 for updates before learning starts)."""

    critic_loss: jax.Array
    q_mean: jax.Array  # mean of the critics' values of the sampled pairs
    actor_loss: jax.Array
    entropy: jax.Array  # −mean log π of the actor's fresh actions
    alpha: jax.Array  # the temperature the step used


def soft_targets(
    nets: Nets, model: Model, seq: Transition, key: jax.Array, alpha, gamma, n_step
) -> jax.Array:
    """``[M]`` soft n-step targets: rewards, then ``min_i Q'_i(s', a') − α
    log π(a'|s')`` with ``a' ~ π(s')`` at each step's ``final_obs``."""
    mean, log_std = nets.actor(model.actor, seq.final_obs)  # [n, M, A]
    next_action, next_log_prob = squashed_sample(key, mean, log_std)
    q_next = nets.critic(model.target_critic, seq.final_obs, next_action)
    next_values = q_next.min(axis=-1) - alpha * next_log_prob  # [n, M]
    return n_step_targets(seq, next_values, gamma, n_step)


class ActorStats(NamedTuple):
    actor_loss: jax.Array
    log_prob: jax.Array  # mean log π of the fresh actions (held fixed)


def actor_loss(
    actor: Callable,
    flat: jax.Array,
    critics: Callable,
    obs: jax.Array,
    key: jax.Array,
    alpha: jax.Array,
) -> tuple[jax.Array, ActorStats]:
    """``mean(α log π(a|s) − min_i Q_i(s, a))``, ``a ~ π(s)`` reparameterised;
    ``obs`` ``[M, *obs_shape]``, ``critics(obs, action) -> Q [M, 2]``."""
    action, log_prob = squashed_sample(key, *actor(flat, obs))
    q = critics(obs, action).min(axis=-1)
    loss = jnp.mean(alpha * log_prob - q)
    return loss, ActorStats(loss, jax.lax.stop_gradient(log_prob.mean()))


def temperature_loss(
    apply_fn: None, log_alpha: jax.Array, log_prob: jax.Array, target: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """``−log α · (mean log π + target entropy)``; ``log_alpha`` ``[1]``."""
    loss = -log_alpha[0] * (log_prob + target)
    return loss, loss
