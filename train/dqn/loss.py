"""DQN's TD targets and loss on one sampled batch.

Targets come from sequences of ``n`` stored steps (``[n, M]``, time-major, as
``ReplayBuffer.sample`` returns them): ``ondevice_rl.returns.n_step_returns``
sums up to ``n`` rewards and bootstraps from the value of ``final_obs`` where
the sequence ends or the episode was truncated, not where it terminated.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from ondevice_rl.returns import n_step_returns
from ondevice_rl.rollout import Transition


class LossStats(NamedTuple):
    """Scalars of one gradient step (0 for updates before learning starts)."""

    td_loss: jax.Array  # the minimised loss
    q_mean: jax.Array  # mean online Q of the sampled (obs, action) pairs


def bootstrap_values(
    q_target_next: jax.Array, q_online_next: jax.Array | None = None
) -> jax.Array:
    """Value of each next observation, ``[..., A] -> [...]``.

    DQN: ``max_a Q_target(s', a)``. Double DQN (``q_online_next`` given): the
    target network's value of the online network's greedy action.
    """
    if q_online_next is None:
        return q_target_next.max(axis=-1)
    greedy = jnp.argmax(q_online_next, axis=-1)
    return taken(q_target_next, greedy)


def taken(q: jax.Array, action: jax.Array) -> jax.Array:
    """``q[..., action]``: ``[..., A]``, ``[...]`` int -> ``[...]``.

    A one-hot product rather than a gather, whose gradient (a scatter) is
    slow on CPU.
    """
    return jnp.sum(q * jax.nn.one_hot(action, q.shape[-1], dtype=q.dtype), axis=-1)


def td_targets(
    seq: Transition, next_values: jax.Array, gamma: jax.Array, n_step: int
) -> jax.Array:
    """n-step targets ``[M]`` for the first step of each sequence.

    ``G = Σ_{i<m} γ^i r[i] + γ^m·v'[m−1]·(1 − terminated[m−1])`` with ``m ≤
    n_step`` stopping at the first episode end; ``n_step = 1`` is
    ``r + γ·(1 − terminated)·v'``.

    Args:
        seq: ``[n_step, M]`` stored steps (reward, terminated, truncated used).
        next_values: ``[n_step, M]`` values of ``seq.final_obs``
            (``bootstrap_values``).
        gamma: scalar (traced).
    """
    returns = n_step_returns(
        seq.reward, next_values, seq.terminated, seq.truncated, gamma, n_step
    )
    return returns[0]


def td_loss(
    apply_fn: Callable[[Any, jax.Array], jax.Array],
    params: Any,
    obs: jax.Array,
    action: jax.Array,
    targets: jax.Array,
    kind: str = "mse",
) -> tuple[jax.Array, LossStats]:
    """Mean TD loss of ``Q(obs, action)`` against fixed ``targets``.

    Args:
        apply_fn: ``(params, obs [M, ...]) -> Q [M, A]``.
        obs: ``[M, *obs_shape]``; action, targets: ``[M]``.
        kind: ``"mse"`` (mean squared TD error, no ½) or ``"huber"`` (δ = 1).

    Returns:
        ``(loss, LossStats)``.
    """
    q = taken(apply_fn(params, obs), action)
    targets = jax.lax.stop_gradient(targets)
    if kind == "mse":
        loss = jnp.mean((q - targets) ** 2)
    elif kind == "huber":
        loss = jnp.mean(optax.huber_loss(q, targets, delta=1.0))
    else:
        raise ValueError(f"unknown loss {kind!r}; use mse or huber")
    return loss, LossStats(loss, jax.lax.stop_gradient(q.mean()))
