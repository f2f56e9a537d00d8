"""One optimiser step of a learner, on the parameters raveled into one
vector (``ondevice_rl.cpu.flat_params``), with gradients averaged over a
device axis in a data-parallel run.
"""

from collections.abc import Callable
from typing import Any

import jax
import optax

from ondevice_rl.devices.sharding import all_mean


def gradient_step(
    tx: optax.GradientTransformation,
    loss_fn: Callable,
    apply_fn: Callable,
    flat: jax.Array,
    opt_state: Any,
    *loss_args: Any,
    axis_name: str | None = None,
) -> tuple[jax.Array, Any, Any]:
    """One step of ``tx`` on ``loss_fn(apply_fn, flat, *loss_args) -> (loss,
    stats)``; returns ``(flat, opt_state, stats)``.

    With ``axis_name`` (inside ``shard_map``) each device takes the gradient
    of its own data and the gradients are averaged over the axis.
    """
    grad_flat = flat
    if axis_name is not None:
        # Replicated params would make jax.grad sum over devices; as
        # device-varying values each device gets its own gradient.
        grad_flat = jax.lax.pcast(flat, axis_name, to="varying")
    grads, stats = jax.grad(loss_fn, argnums=1, has_aux=True)(
        apply_fn, grad_flat, *loss_args
    )
    if axis_name is not None:
        grads = all_mean(grads, axis_name)
    updates, opt_state = tx.update(grads, opt_state, flat)
    return optax.apply_updates(flat, updates), opt_state, stats
