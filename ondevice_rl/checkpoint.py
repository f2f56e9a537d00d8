"""Save and restore pytrees of arrays (a ``TrainState``, say) with orbax.

Typed PRNG keys (``jax.random.key``) are stored as their raw ``uint32`` key
data and rewrapped on restore, using the key implementation found in ``like``.
"""

from pathlib import Path
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp


def _is_key(x: Any) -> bool:
    return isinstance(x, jax.Array) and jax.dtypes.issubdtype(
        x.dtype, jax.dtypes.prng_key
    )


def _unwrap_keys(tree: Any) -> Any:
    return jax.tree.map(lambda x: jax.random.key_data(x) if _is_key(x) else x, tree)


def save(path: str | Path, pytree: Any) -> Path:
    """Writes ``pytree`` to the directory ``path`` (replaced if it exists).

    Blocks until the checkpoint is complete; returns the absolute path.
    """
    path = Path(path).absolute()
    with ocp.StandardCheckpointer() as checkpointer:
        checkpointer.save(path, _unwrap_keys(pytree), force=True)
        checkpointer.wait_until_finished()
    return path


def restore(path: str | Path, like: Any) -> Any:
    """Reads the pytree saved at ``path``; ``like`` gives its structure, shapes
    and dtypes (arrays or ``jax.ShapeDtypeStruct``; keys must be real key
    arrays so that their implementation is known).
    """
    path = Path(path).absolute()
    abstract = jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(np.shape(x), x.dtype), _unwrap_keys(like)
    )
    with ocp.StandardCheckpointer() as checkpointer:
        restored = checkpointer.restore(path, abstract)
    return jax.tree.map(
        lambda ref, x: (
            jax.random.wrap_key_data(x, impl=jax.random.key_impl(ref))
            if _is_key(ref)
            else x
        ),
        like,
        restored,
    )
