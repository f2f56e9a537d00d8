"""Target networks, for the learners that bootstrap from one: when they
move and how."""

from typing import Any

import jax


def polyak(online: Any, target: Any, tau: jax.Array) -> Any:
    """``tau·online + (1 − tau)·target``, leaf by leaf; ``tau = 1`` copies."""
    return jax.tree.map(lambda new, old: tau * new + (1.0 - tau) * old, online, target)


def crossed(before: jax.Array, after: jax.Array, every: int) -> jax.Array:
    """Whether a count going from ``before`` to ``after`` passed a multiple of
    ``every`` (e.g. env steps past a target-update boundary)."""
    return after // every > before // every
