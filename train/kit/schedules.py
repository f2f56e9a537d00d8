"""Learning-rate schedules over a run, in one unit: updates.

Written as PureJaxRL and CleanRL write their linear anneal, ``lr · (1 −
u/N)``, so annealed runs keep their numbers exactly; ``optax``'s schedules
compute ``init + (end − init) · frac``, which differs in the last bit.
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp

LR_SCHEDULES = ("constant", "linear", "cosine")


def learning_rate_fn(
    kind: str, base: jax.Array, num_updates: int, opt_steps_per_update: int
) -> Callable[[jax.Array], jax.Array]:
    """``count -> learning rate`` for an optax optimiser whose ``count`` is
    its optimiser steps; ``opt_steps_per_update`` of them make one update.

    ``kind``: "constant" (``base``), "linear" (from ``base`` at update 0 to
    0 at ``num_updates``) or "cosine" (half a cosine from ``base`` to 0).
    """
    if kind == "constant":
        return lambda count: base

    def schedule(count):
        done = (count // opt_steps_per_update).astype(jnp.float32) / num_updates
        if kind == "linear":
            return base * (1.0 - done)
        return base * 0.5 * (1.0 + jnp.cos(jnp.pi * jnp.minimum(done, 1.0)))

    return schedule
