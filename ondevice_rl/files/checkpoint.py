"""Save and restore pytrees of arrays (a train state, say) with orbax.

``save``/``restore`` handle one checkpoint directory; ``Checkpoints`` a
directory of numbered ones (by update), keeping the last few. Orbax writes
each checkpoint into a temporary directory and renames it when complete, so
a process killed mid-write leaves the previous checkpoints intact (the
unfinished one is never listed).

Numbered checkpoints are verified, not trusted: each records the checksum of
every byte of its files once complete (``ondevice_rl/files/checksums.py``);
``Checkpoints.verified`` finds the newest that still matches and says why the
newer ones do not, and ``set_aside`` moves those out of the way (into
``<directory>.damaged/``), deleting nothing. A restore first compares the
stored shapes with the ones asked for (``CheckpointMismatch``, one line).

Typed PRNG keys (``jax.random.key``) are stored as their raw ``uint32`` key
data and rewrapped on restore, using the key implementation found in ``like``.
Arrays with a zero-size dimension (MJX's ``Data`` has some) hold no data and
orbax refuses them: they are left out and rebuilt from ``like`` on restore.
"""

import shutil
from pathlib import Path
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

from ondevice_rl.files import checksums, library_noise
from ondevice_rl.files.partial_saves import remove_until_quiet

#: Where orbax's manager puts a numbered checkpoint's one (unnamed) item.
_ITEM = "default"
DAMAGED_SUFFIX = ".damaged"


class CheckpointMismatch(ValueError):
    """A checkpoint that does not hold the state asked for (one line)."""


class NoVerifiedCheckpoint(ValueError):
    """Checkpoints are there but none verifies (one line naming the folder)."""


def describe_skipped(skipped: list[tuple[int, str]]) -> str:
    """``checkpoint 8 (why), checkpoint 6 (why)``."""
    return ", ".join(f"checkpoint {step} ({why})" for step, why in skipped)


def _is_key(x: Any) -> bool:
    return isinstance(x, jax.Array | jax.ShapeDtypeStruct) and (
        jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)
    )


def _stored_leaf(x: Any) -> Any:
    """What orbax writes for one leaf: key data for keys, None if empty
    (shapes alone for ``ShapeDtypeStruct``s, as ``jax.eval_shape`` gives)."""
    if np.size(x) == 0:
        return None
    if not _is_key(x):
        return x
    if isinstance(x, jax.ShapeDtypeStruct):
        return jax.eval_shape(jax.random.key_data, x)
    return jax.random.key_data(x)


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


def _path_names(path: tuple) -> tuple[str, ...]:
    """A tree path as names, alike for a NamedTuple field and the dict key
    orbax stores it under."""
    names = []
    for entry in path:
        for attr in ("key", "name", "idx"):
            if hasattr(entry, attr):
                names.append(str(getattr(entry, attr)))
                break
    return tuple(names)


def _check_shapes(item: Path, abstract: Any, step: int) -> None:
    """``CheckpointMismatch`` unless the checkpoint in ``item`` holds every
    leaf of ``abstract`` with its shape and dtype, read from the stored
    metadata: a mismatch that orbax finds mid-read leaves its other reads
    to print tracebacks ("Event loop is closed") after the error."""
    handler = ocp.PyTreeCheckpointHandler()
    try:
        stored = handler.metadata(item)
    except (OSError, ValueError, KeyError, TypeError) as e:
        first = (str(e).strip().splitlines() or [repr(e)])[0]
        raise CheckpointMismatch(
            f"checkpoint {step}: unreadable metadata ({first})"
        ) from None
    finally:
        handler.close()
    stored = {
        _path_names(p): leaf for p, leaf in jax.tree_util.tree_leaves_with_path(stored)
    }
    for path, want in jax.tree_util.tree_leaves_with_path(abstract):
        name = "/".join(_path_names(path))
        got = stored.get(_path_names(path))
        if got is None:
            raise CheckpointMismatch(f"checkpoint {step} holds no {name}")
        have = (tuple(got.shape), np.dtype(got.dtype))
        if have != (tuple(want.shape), np.dtype(want.dtype)):
            raise CheckpointMismatch(
                f"checkpoint {step} holds {name} as {list(have[0])} {have[1]}, "
                f"not {list(want.shape)} {np.dtype(want.dtype)}"
            )


class Checkpoints:
    """Numbered checkpoints of one run in ``directory``; saving keeps the
    newest ``keep``. Saves are synchronous (complete, checksums recorded,
    when ``save`` returns; a failed one leaves nothing behind where it can
    delete it). Reading opens no orbax manager: only the first
    ``save`` does, so what it counts toward ``keep`` is what is there then."""

    def __init__(self, directory: str | Path, keep: int = 3):
        self.directory = Path(directory).absolute()
        self.keep = keep
        self._manager = None

    def __enter__(self) -> "Checkpoints":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        try:
            self.close()
        except Exception:
            if exc_type is None:
                raise  # else the error in flight says more (a full disk, say)

    def close(self) -> None:
        if self._manager is not None:
            manager, self._manager = self._manager, None
            manager.close()

    def steps(self) -> list[int]:
        """The checkpoints' numbers, oldest first (verified or not)."""
        if not self.directory.is_dir():
            return []
        found = (p.name for p in self.directory.iterdir() if p.is_dir())
        return sorted(int(name) for name in found if name.isdigit())

    def latest(self) -> int | None:
        steps = self.steps()
        return steps[-1] if steps else None

    def path(self, step: int) -> Path:
        return self.directory / str(step)

    def verified(self) -> tuple[int | None, list[tuple[int, str]]]:
        """``(newest, skipped)``: the newest checkpoint that verifies (None if
        none does) and, newest first, the newer ones that do not, each with
        why."""
        skipped = []
        for step in reversed(self.steps()):
            reason = checksums.verify(self.path(step))
            if reason is None:
                return step, skipped
            skipped.append((step, reason))
        return None, skipped

    def usable(self) -> tuple[int | None, list[tuple[int, str]]]:
        """``verified()``, but ``NoVerifiedCheckpoint`` when there are
        checkpoints and none verifies (None: there are none at all)."""
        step, skipped = self.verified()
        if step is None and skipped:
            raise NoVerifiedCheckpoint(
                f"{self.directory}: no checkpoint verifies: "
                f"{describe_skipped(skipped)}; nothing was moved or deleted"
            )
        return step, skipped

    def set_aside(self, steps: list[int]) -> Path:
        """Moves checkpoints ``steps`` into ``<directory>.damaged/`` (a name
        taken gets a suffix); returns that folder."""
        aside = self.directory.with_name(self.directory.name + DAMAGED_SUFFIX)
        aside.mkdir(exist_ok=True)
        for step in steps:
            target, n = aside / str(step), 0
            while target.exists():
                n += 1
                target = aside / f"{step}-{n}"
            shutil.move(self.path(step), target)
        if self._manager is not None:
            self._manager.reload()
        return aside

    def save(self, step: int, pytree: Any) -> None:
        if self._manager is None:
            options = ocp.CheckpointManagerOptions(
                max_to_keep=self.keep,
                enable_async_checkpointing=False,
                cleanup_tmp_directories=True,
            )
            self._manager = ocp.CheckpointManager(self.directory, options=options)
        try:
            with library_noise.held():  # orbax's threads report a failure each
                self._manager.save(
                    step, args=ocp.args.StandardSave(_to_stored(pytree)), force=True
                )
                self._manager.wait_until_finished()
            checksums.record(self.path(step))
        except BaseException:
            self._remove_partial(step)
            raise

    def _remove_partial(self, step: int) -> None:
        """Removes what a failed save of ``step`` left (its space is what a
        full disk needs to record the stop); on a read-only disk it stays,
        unverified, and is skipped as such."""
        remove_until_quiet(
            lambda: [
                path
                for path in (
                    *self.directory.glob(f"{step}.orbax-checkpoint-tmp*"),
                    self.path(step),
                )
                if path.is_dir() and checksums.verify(path) is not None
            ]
        )

    def check(self, step: int, like: Any) -> None:
        """``CheckpointMismatch`` unless checkpoint ``step`` holds every leaf
        of ``like`` (arrays or ``jax.ShapeDtypeStruct``s, typed keys too)
        with its shape and dtype; reads only the stored metadata."""
        _check_shapes(self.path(step) / _ITEM, _abstract(like), step)

    def restore(self, step: int, like: Any) -> Any:
        """Checkpoint ``step``; ``like`` as for ``restore`` (its shapes are
        checked first: ``CheckpointMismatch``)."""
        item = self.path(step) / _ITEM
        _check_shapes(item, _abstract(like), step)
        with ocp.StandardCheckpointer() as checkpointer:
            restored = checkpointer.restore(item, _abstract(like))
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
        item = self.path(step) / _ITEM
        _check_shapes(item, abstract, step)
        args = ocp.args.PyTreeRestore(
            item=abstract,
            restore_args=ocp.checkpoint_utils.construct_restore_args(abstract),
            partial_restore=True,
        )
        with ocp.PyTreeCheckpointer() as checkpointer:
            restored = checkpointer.restore(item, args=args)
        return _from_stored(like, restored)


def restore(path: str | Path, like: Any) -> Any:
    """Reads the pytree saved at ``path``; ``like`` gives its structure, shapes
    and dtypes (arrays or ``jax.ShapeDtypeStruct``; keys must be real key
    arrays so that their implementation is known).
    """
    path = Path(path).absolute()
    with ocp.StandardCheckpointer() as checkpointer:
        restored = checkpointer.restore(path, _abstract(like))
    return _from_stored(like, restored)
