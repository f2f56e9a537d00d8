"""TD3's losses on one sampled batch, on raveled parameters (``Nets``).

Sequences are ``[n, M]`` (time-major, as ``ReplayBuffer.sample`` returns
them); the loss terms read their first step, the n-step targets bootstrap
from each step's ``final_obs``. Unit actions in ``[-1, 1]^A``.
"""

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.rollout import Transition
from ondevice_rl.train.kit.off_policy import Model, Nets, n_step_targets


class TD3Stats(NamedTuple):
    """Scalars of one gradient step (0 for updates before learning starts)."""

    critic_loss: jax.Array
    q_mean: jax.Array  # mean of the critics' values of the sampled pairs
    actor_loss: jax.Array  # −mean Q₁(s, μ(s)), also on steps without an update


def smoothed_targets(
    nets: Nets, model: Model, seq: Transition, key: jax.Array, hp, n_step: int
) -> jax.Array:
    """``[M]`` n-step targets bootstrapped from ``min_i Q'_i(s', a')``, ``a' =
    clip(μ'(s') + clip(ε, ±target_noise_clip), ±1)``, ``ε ~ N(0,
    target_noise²)``, ``μ'`` the target actor (``model.own``)."""
    action = nets.actor(model.own, seq.final_obs)  # [n, M, A]
    noise = hp.target_noise * jax.random.normal(key, action.shape)
    noise = jnp.clip(noise, -hp.target_noise_clip, hp.target_noise_clip)
    next_action = jnp.clip(action + noise, -1.0, 1.0)
    q_next = nets.critic(model.target_critic, seq.final_obs, next_action)
    return n_step_targets(seq, q_next.min(axis=-1), hp.gamma, n_step)


def actor_loss(
    actor: Callable, flat: jax.Array, critics: Callable, obs: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """``−mean Q₁(s, μ(s))`` (the first critic), ``obs`` ``[M, *obs_shape]``,
    ``critics(obs, action) -> Q [M, 2]``."""
    loss = -jnp.mean(critics(obs, actor(flat, obs))[..., 0])
    return loss, loss
