"""Save and restore pytrees of arrays (a train state, say) with orbax.

``save``/``restore`` handle one checkpoint directory; ``Checkpoints`` a
directory of numbered ones (by update), keeping the last few. Orbax writes
each checkpoint into a temporary directory and renames it when complete, so
a process killed mid-write leaves the previous checkpoints intact (the
unfinished one is never listed).

Typed PRNG keys (``jax.random.key``) are stored as their raw ``uint32`` key
data and rewrapped on restore, using the key implementation found in ``like``.
Arrays with a zero-size dimension (MJX's ``Data`` has some) hold no data and
orbax refuses them: they are left out and rebuilt from ``like`` on restore.
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


def _stored_leaf(x: Any) -> Any:
    """What orbax writes for one leaf: key data for keys, None if empty."""
    if np.size(x) == 0:
        return None
    return jax.random.key_data(x) if _is_key(x) else x


def _to_stored(tree: Any) -> Any:
    return jax.tree.map(_stored_leaf, tree)


def save(path: str | Path, pytree: Any) -> Path:
    """Writes ``pytree`` to the directory ``path`` (replaced if it exists).

    Blocks until the checkpoint is complete; returns the absolute path.
    """
    path = Path(path).absolute()
    with ocp.StandardCheckpointer() as checkpointer:
        checkpointer.save(path, _to_stored(pytree), force=True)
        checkpointer.wait_until_finished()
    return path


def _abstract(like: Any) -> Any:
    return jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(np.shape(x), x.dtype), _to_stored(like)
    )


def _from_stored(like: Any, restored: Any) -> Any:
    """``restored`` (``like``'s structure, None where ``like`` is empty) with
    keys rewrapped and the empty arrays rebuilt."""
    refs, treedef = jax.tree.flatten(like)
    values = jax.tree.leaves(restored, is_leaf=lambda x: x is None)

    def rebuild(ref, x):
        if x is None:
            return np.zeros(np.shape(ref), ref.dtype)
        if _is_key(ref):
            return jax.random.wrap_key_data(x, impl=jax.random.key_impl(ref))
        return x

    return treedef.unflatten([rebuild(r, x) for r, x in zip(refs, values, strict=True)])


class Checkpoints:
    """Numbered checkpoints of one run in ``directory``; the newest ``keep``
    are kept. Saves are synchronous (complete when ``save`` returns)."""

    def __init__(self, directory: str | Path, keep: int = 3):
        self.directory = Path(directory).absolute()
        options = ocp.CheckpointManagerOptions(
            max_to_keep=keep,
            enable_async_checkpointing=False,
            cleanup_tmp_directories=True,
        )
        self._manager = ocp.CheckpointManager(self.directory, options=options)

    def __enter__(self) -> "Checkpoints":
        return self

    def __exit__(self, *exc) -> None:
        self._manager.close()

    def steps(self) -> list[int]:
        """The complete checkpoints' numbers, oldest first."""
        return sorted(self._manager.all_steps())

    def latest(self) -> int | None:
        steps = self.steps()
        return steps[-1] if steps else None

    def save(self, step: int, pytree: Any) -> None:
        self._manager.save(
            step, args=ocp.args.StandardSave(_to_stored(pytree)), force=True
        )
        self._manager.wait_until_finished()

    def restore(self, step: int, like: Any) -> Any:
        """Checkpoint ``step``; ``like`` as for ``restore``."""
        restored = self._manager.restore(
            step, args=ocp.args.StandardRestore(_abstract(like))
        )
        return _from_stored(like, restored)

    def restore_fields(self, step: int, like: dict[str, Any]) -> dict[str, Any]:
        """Only some top-level fields of checkpoint ``step`` (a NamedTuple or
        dict was saved): ``like`` maps field names to what ``restore`` takes.
        Other fields are neither read nor checked (a replay buffer, say, or a
        field added to the state since)."""
        device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
        abstract = jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=device),
            _abstract(like),
        )
        args = ocp.args.PyTreeRestore(
            item=abstract,
            restore_args=ocp.checkpoint_utils.construct_restore_args(abstract),
            partial_restore=True,
        )
        return _from_stored(like, self._manager.restore(step, args=args))


def restore(path: str | Path, like: Any) -> Any:
    """Reads the pytree saved at ``path``; ``like`` gives its structure, shapes
    and dtypes (arrays or ``jax.ShapeDtypeStruct``; keys must be real key
    arrays so that their implementation is known).
    """
    path = Path(path).absolute()
    with ocp.StandardCheckpointer() as checkpointer:
        restored = checkpointer.restore(path, _abstract(like))
    return _from_stored(like, restored)
