"""A branch of an update that the device takes or skips on its own.

``lax.cond`` whose predicate every member of a population shares (it hangs
on the update count: learning has started, a target update is due) stays a
conditional under ``vmap``. On a GPU a conditional is the host reading the
predicate back, a stream synchronisation, then the branch's own CUDA graph:
an update of DQN was four graphs and two loose launches around its two
conditionals (``ondevice-rl bench launches``). Off CPU, ``cond_or_select``
runs both branches and selects, so the update is one graph the device runs
without waiting on the host. XLA:CPU keeps the conditional: it skips the
branch not taken, and its program stays what it was (chosen when the
program is lowered).
"""

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from ondevice_rl.scans import traced_once


def cond_or_select(
    pred: jax.Array, on_true: Callable[[], Any], on_false: Callable[[], Any]
) -> Any:
    """``jax.lax.cond(pred, on_true, on_false)`` on CPU; elsewhere
    ``select_branch``."""
    on_true, on_false = traced_once(on_true), traced_once(on_false)
    return jax.lax.platform_dependent(
        cpu=lambda: jax.lax.cond(pred, on_true, on_false),
        default=lambda: select_branch(pred, on_true, on_false),
    )


def select_branch(
    pred: jax.Array, on_true: Callable[[], Any], on_false: Callable[[], Any]
) -> Any:
    """Both branches and ``jnp.where(pred, ...)`` over their outputs: the
    values of ``lax.cond``, the branch not taken computed and dropped."""
    taken, other = on_true(), on_false()
    return jax.tree.map(lambda a, b: jnp.where(pred, a, b), taken, other)
