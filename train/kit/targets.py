"""Target networks, for the learners that bootstrap from one."""

from typing import Any

import jax


def polyak(online: Any, target: Any, tau: jax.Array) -> Any:
    """``tau·online + (1 − tau)·target``, leaf by leaf; ``tau = 1`` copies."""
    return jax.tree.map(lambda new, old: tau * new + (1.0 - tau) * old, online, target)
