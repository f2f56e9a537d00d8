"""Return estimators over a ``[T, B]`` rollout that tell truncation from
termination.

Every estimator takes ``next_values[t]``: the value of the observation step
``t`` reached *before* any auto-reset (``Transition.final_obs``); for a
Q-learner, ``max_a Q(final_obs, a)``. A terminated step does not bootstrap;
a truncated one (time limit) bootstraps from ``next_values[t]``; either way
the recursion does not run past an episode boundary. The last step of the
rollout bootstraps from ``next_values[T-1]``.

* ``gae``: generalised advantage estimation (PPO, A2C with λ);
* ``n_step_returns``: bootstrapped discounted returns over at most ``n``
  rewards (``n=None``: to the end of the rollout, as A2C/PAAC);
* ``lambda_returns``: λ-returns (Q(λ) for PQN; equal to ``n_step_returns``
  to the rollout's end at λ = 1 and to one-step targets at λ = 0).
"""

import jax
import jax.numpy as jnp

from ondevice_rl.scans import unrolled_off_cpu


def _flags(terminated: jax.Array, truncated: jax.Array):
    """``(not_terminal, continues)`` as float32 ``[T, B]``."""
    not_terminal = 1.0 - terminated.astype(jnp.float32)
    continues = 1.0 - jnp.logical_or(terminated, truncated).astype(jnp.float32)
    return not_terminal, continues


def _reverse_scan(step, init, xs):
    # Unrolled by 16 off CPU: 128 steps on a GPU cost 384 launches, 8
    # unrolled iterations 32.
    with jax.named_scope("returns"):
        _, out = unrolled_off_cpu(
            lambda c, x: (step(c, x),) * 2, init, xs, unroll=16, reverse=True
        )
    return out


def gae(
    rewards: jax.Array,
    values: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    gamma: jax.Array,
    gae_lambda: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """Advantages and value targets.

    Args:
        rewards, values, next_values: ``[T, B]`` float32 (``values[t]`` is
            the critic's value of ``obs[t]``).
        terminated, truncated: ``[T, B]`` bool.
        gamma, gae_lambda: scalars (traced).

    Returns:
        ``(advantages, targets)``, both ``[T, B]``; ``targets = advantages + values``.
    """
    not_terminal, continues = _flags(terminated, truncated)
    deltas = rewards + gamma * next_values * not_terminal - values
    decay = gamma * gae_lambda * continues
    advantages = _reverse_scan(
        lambda carry, x: x[0] + x[1] * carry, jnp.zeros_like(deltas[0]), (deltas, decay)
    )
    return advantages, advantages + values


def lambda_returns(
    rewards: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    gamma: jax.Array,
    lam: jax.Array,
) -> jax.Array:
    """λ-returns ``[T, B]``:
    ``G[t] = r[t] + γ·(1 − term[t])·((1 − λ)·v'[t] + λ·G[t+1])`` inside an
    episode, ``G[t] = r[t] + γ·(1 − term[t])·v'[t]`` at its end or the
    rollout's, where ``v' = next_values``.

    Args:
        rewards, next_values: ``[T, B]`` float32.
        terminated, truncated: ``[T, B]`` bool.
        gamma, lam: scalars (traced).
    """
    not_terminal, continues = _flags(terminated, truncated)
    mix = lam * continues  # weight of G[t+1]; 0 where the episode ended

    def step(next_return, x):
        r, v, nt, w = x
        return r + gamma * nt * ((1.0 - w) * v + w * next_return)

    return _reverse_scan(
        step, next_values[-1], (rewards, next_values, not_terminal, mix)
    )


def n_step_returns(
    rewards: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    gamma: jax.Array,
    n: int | None = None,
) -> jax.Array:
    """Discounted returns over at most ``n`` rewards, then a bootstrap: ``[T, B]``.

    ``G[t] = Σ_{i<m} γ^i r[t+i] + γ^m·v'[t+m−1]`` where ``m ≤ n`` stops early
    at an episode's end (no bootstrap if it terminated) or the rollout's.
    ``n=None`` runs to the end of the rollout (A2C's "n-step" return, ``n =
    T − t``). ``n`` is static.

    Args:
        rewards, next_values: ``[T, B]`` float32.
        terminated, truncated: ``[T, B]`` bool.
        gamma: scalar (traced).
    """
    if n is None:
        return lambda_returns(
            rewards, next_values, terminated, truncated, gamma, jnp.float32(1.0)
        )
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    not_terminal, continues = _flags(terminated, truncated)
    returns = rewards + gamma * not_terminal * next_values  # one-step targets
    for _ in range(n - 1):
        # G_{k+1}[t] = r[t] + γ·(1−term[t])·(G_k[t+1] inside an episode, else v'[t])
        later = jnp.concatenate([returns[1:], next_values[-1:]], axis=0)
        tail = jnp.where(continues > 0, later, next_values)
        returns = rewards + gamma * not_terminal * tail
    return returns
