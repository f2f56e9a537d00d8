"""Generalised advantage estimation that tells truncation from termination."""

import jax
import jax.numpy as jnp


def gae(
    rewards: jax.Array,
    values: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    gamma: jax.Array,
    gae_lambda: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """Advantages and value targets over a rollout.

    ``next_values[t]`` is the critic's value of the observation reached by step
    ``t`` *before* any auto-reset (``info["final_obs"]``). A terminated step
    does not bootstrap; a truncated one does, from that value. Either way the
    advantage recursion stops at an episode boundary.

    Args:
        rewards, values, next_values: ``[T, B]`` float32.
        terminated, truncated: ``[T, B]`` bool.
        gamma, gae_lambda: scalars (traced).

    Returns:
        ``(advantages, targets)``, both ``[T, B]``; ``targets = advantages + values``.
    """
    not_terminal = 1.0 - terminated.astype(jnp.float32)
    continues = 1.0 - jnp.logical_or(terminated, truncated).astype(jnp.float32)
    deltas = rewards + gamma * next_values * not_terminal - values
    decay = gamma * gae_lambda * continues

    def backward(carry, x):
        delta, d = x
        carry = delta + d * carry
        return carry, carry

    _, advantages = jax.lax.scan(
        backward, jnp.zeros_like(deltas[0]), (deltas, decay), reverse=True
    )
    return advantages, advantages + values
