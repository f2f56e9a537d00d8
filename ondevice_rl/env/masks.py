"""Action masks: which discrete actions are legal, and honouring them.

An environment with an action mask gives a dict observation with the entry
``"action_mask"``: ``[A]`` bool for ``Discrete(A)`` actions, True where the
action is legal in the state the observation belongs to (so reset's
observation has one, auto-reset hands over the new episode's, and a
transition's ``final_obs`` carries the next state's). Its space entry is
``Box(0, 1, (A,), jnp.bool_)``.

Learners take the mask out before the network (``split_action_mask``) and
put it back on the network's output (``mask_output``): illegal logits and
action values become ``MASKED``, so sampling, argmax, log-probabilities,
entropies and a bootstrap's ``max`` range over the legal actions only. A
mask with no legal action (a terminal state's, in some suites) counts as
all legal, so no value is ever ``MASKED`` everywhere.
"""

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp

ACTION_MASK = "action_mask"

#: What an illegal action's logit or value becomes: finite, so that
#: ``log_softmax · one_hot`` and ``p · log p`` stay 0 instead of NaN, and far
#: below any value a network outputs.
MASKED = float(jnp.finfo(jnp.float32).min)


def split_action_mask(obs: Any) -> tuple[Any, jax.Array | None]:
    """``(obs without its "action_mask" entry, the mask [..., A] or None)``.

    Works on observations and on observation spaces alike (static: whether
    there is a mask depends on the structure only).
    """
    if isinstance(obs, Mapping) and ACTION_MASK in obs:
        rest = {k: v for k, v in obs.items() if k != ACTION_MASK}
        return rest, obs[ACTION_MASK]
    return obs, None


def has_action_mask(obs_or_space: Any) -> bool:
    """Whether an observation (or its space) carries an action mask."""
    return split_action_mask(obs_or_space)[1] is not None


def legal_actions(mask: jax.Array) -> jax.Array:
    """``mask`` ``[..., A]`` bool, with rows that allow nothing allowing all."""
    return mask | ~jnp.any(mask, axis=-1, keepdims=True)


def mask_values(x: jax.Array, mask: jax.Array | None) -> jax.Array:
    """Logits or action values ``[..., A]`` with illegal entries ``MASKED``."""
    if mask is None:
        return x
    return jnp.where(legal_actions(mask), x, jnp.asarray(MASKED, x.dtype))


def mask_output(out: Any, mask: jax.Array | None) -> Any:
    """A network's output with illegal actions masked: action values ``[...,
    A]``, or a ``PolicyOutput`` whose discrete logits are masked (a Gaussian
    policy's output is returned as it is)."""
    if mask is None:
        return out
    if isinstance(out, jax.Array):
        return mask_values(out, mask)
    if getattr(out, "log_std", None) is not None:
        return out
    return out._replace(logits_or_mean=mask_values(out.logits_or_mean, mask))


def combine_masks(a: jax.Array | None, b: jax.Array | None) -> jax.Array | None:
    """Actions legal under both masks (either may be None: no constraint)."""
    if a is None:
        return b
    if b is None:
        return a
    return a & b
