"""Resets computed only for the environments whose episode ended.

``AutoReset`` computes a reset at every step and selects it where an
episode ended (under ``vmap`` a ``lax.cond`` runs both branches anyway).
For most worlds a reset costs about a step, and the select is the fastest
way. A world whose reset costs far more than its step declares
``costly_reset = True`` (Craftax generates a whole world: on 2 CPU cores,
64 Craftax-Classic resets take 168 ms, 64 steps 9 ms), and ``AutoReset``
resets it through ``reset_where``:

* one environment: ``lax.cond(done, reset, keep)``, a real branch;
* under ``vmap`` over ``B`` environments (its batching rule): the ended
  environments' indices are gathered, and a ``while_loop`` resets them
  ``chunk_size(B)`` at a time, so a step pays for the ended environments'
  resets only, in ``ceil(ended / chunk)`` rounds.

Exact: each environment resets from its own key, as the select would, and
no reset is shared or replayed (Craftax's optimistic reset hands one reset
to several environments when many end at once). Under an outer ``vmap``
(seeds) the loop runs as long as the member with the most ended
environments needs.
"""

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.custom_batching import custom_vmap

#: Environments reset per round of the loop: ``B // CHUNK_FRACTION`` (≥ 1).
CHUNK_FRACTION = 16


def chunk_size(batch: int) -> int:
    """Environments reset per round at batch size ``batch``."""
    return max(1, batch // CHUNK_FRACTION)


def reset_where(
    reset: Callable[[jax.Array, Any], tuple[Any, Any]],
    done: jax.Array,
    key: jax.Array,
    params: Any,
    obs: Any,
    state: Any,
) -> tuple[Any, Any]:
    """``reset(key, params)`` where ``done``, else ``(obs, state)``; see the
    module docstring. Unbatched: ``done`` ``[]``, ``key`` one key, ``obs``
    and ``state`` one environment's."""

    @custom_vmap
    def one(done, key, params, obs, state):
        return jax.lax.cond(done, lambda: reset(key, params), lambda: (obs, state))

    @one.def_vmap
    def batched(axis_size, in_batched, done, key, params, obs, state):
        done_b, key_b, params_b, obs_b, state_b = in_batched

        def full(x, b):
            return x if b else jnp.broadcast_to(x, (axis_size, *x.shape))

        done, key = full(done, done_b), full(key, key_b)
        obs = jax.tree.map(full, obs, obs_b)
        state = jax.tree.map(full, state, state_b)
        out = _reset_ended(reset, done, key, params, params_b, (obs, state))
        return out, jax.tree.map(lambda _: True, out)

    return one(done, key, params, obs, state)


def _reset_ended(reset, done, key, params, params_batched, current):
    """``current`` (``(obs, state)``, leaves ``[B, ...]``) with the ended
    environments' entries replaced by their resets, ``chunk`` per round;
    ``params_batched`` (bools, the shape of ``params``) marks the leaves
    that are ``[B, ...]``."""
    batch = done.shape[0]
    chunk = chunk_size(batch)
    rounds = -(-batch // chunk)
    # Ended environments' indices first; ``batch`` (out of range) after them.
    ended = jnp.nonzero(done, size=rounds * chunk, fill_value=batch)[0]
    count = done.sum(dtype=jnp.int32)
    params_axes = jax.tree.map(lambda b: 0 if b else None, params_batched)
    reset_many = jax.vmap(reset, in_axes=(0, params_axes))

    def more(carry):
        return carry[0] * chunk < count

    def one_round(carry):
        i, current = carry
        index = jax.lax.dynamic_slice(ended, (i * chunk,), (chunk,))
        safe = jnp.minimum(index, batch - 1)
        picked = jax.tree.map(lambda x, b: x[safe] if b else x, params, params_batched)
        fresh = reset_many(key[safe], picked)
        # Indices past the ended ones are ``batch``: their writes are dropped.
        current = jax.tree.map(
            lambda a, u: a.at[index].set(u, mode="drop"), current, fresh
        )
        return i + 1, current

    return jax.lax.while_loop(more, one_round, (jnp.int32(0), current))[1]
