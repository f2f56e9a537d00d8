"""A search's checkpoints: the whole population at round boundaries.

``search/round-<r>/`` holds, once round ``r`` is done:

* ``population.npz``: every leaf of the ``Population`` (every member's
  learning state, PRNG keys as their key data, hyperparameters, scores,
  curves so far, the strategy's bookkeeping), named by its tree path;
* ``lineage.npz``: the ``RoundRecord`` of every round so far, ``[r, P]``;
* ``checksums.json``: size and SHA-256 of both (``ondevice_rl.files.checksums``).

A round is written into ``round-<r>.tmp/`` and renamed once complete, so a
kill leaves the previous rounds intact; the newest two are kept. On resume
the newest one that verifies is read back, every leaf checked against the
shapes the program expects (one line naming what differs).
"""

import shutil
from pathlib import Path
from typing import Any

import jax
import numpy as np

from ondevice_rl.files import checksums
from ondevice_rl.train.run.artifacts import RunDirError
from ondevice_rl.train.sweep.store import leaf_name, named_arrays, read_npz

SEARCH_DIR = "search"
POPULATION_FILE = "population.npz"
LINEAGE_FILE = "lineage.npz"
KEEP = 2


def is_key(x: Any) -> bool:
    return jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def keys_as_data(tree: Any) -> Any:
    """``tree`` with its PRNG keys as their key data (what files hold)."""
    return jax.tree.map(lambda x: jax.random.key_data(x) if is_key(x) else x, tree)


def keys_wrapped(tree: Any, like: Any) -> Any:
    """``tree`` with the leaves that are keys in ``like`` wrapped back."""
    return jax.tree.map(
        lambda x, a: jax.random.wrap_key_data(x) if is_key(a) else x, tree, like
    )


def _round_dirs(out: Path) -> list[tuple[int, Path]]:
    folder = out / SEARCH_DIR
    if not folder.is_dir():
        return []
    found = []
    for path in folder.iterdir():
        name = path.name.removeprefix("round-")
        if path.is_dir() and name.isdigit() and path.name.startswith("round-"):
            found.append((int(name), path))
    return sorted(found)


def save_round(out: Path, done: int, population: Any, lineage: dict) -> Path:
    """Writes round ``done``'s checkpoint (host arrays: ``population`` a
    tree with keys as key data, ``lineage`` name -> ``[done, P]``); keeps
    the newest ``KEEP``."""
    folder = out / SEARCH_DIR
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"round-{done}"
    tmp = folder / f"round-{done}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir()
        np.savez(tmp / POPULATION_FILE, **named_arrays(population))
        np.savez(tmp / LINEAGE_FILE, **lineage)
        checksums.record(tmp)
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)  # a full disk: no half round
        e.filename = str(final)  # zipfile's writes name no file
        raise
    for _, old in _round_dirs(out)[:-KEEP]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest_round(out: Path) -> tuple[int | None, Path | None, list[str]]:
    """``(round, folder, skipped)``: the newest checkpoint that verifies
    (None if none does) and one line per newer one that does not."""
    skipped = []
    for done, path in reversed(_round_dirs(out)):
        why = checksums.verify(path)
        if why is None:
            return done, path, skipped
        skipped.append(f"{path}: {why}; skipped")
    return None, None, skipped


def _read(path: Path) -> dict[str, np.ndarray]:
    try:
        return read_npz(path)
    except ValueError as e:
        raise RunDirError(f"{path}: unreadable ({e})") from None


def load_round(path: Path, like: Any) -> tuple[Any, dict[str, np.ndarray]]:
    """``(population, lineage)`` of a verified round folder: the population
    as ``like``'s tree of host arrays (keys as key data), every leaf checked
    against ``like`` (``RunDirError``, one line, if one differs)."""
    arrays = _read(path / POPULATION_FILE)
    lineage = _read(path / LINEAGE_FILE)
    leaves, treedef = jax.tree_util.tree_flatten_with_path(like)
    values = []
    for key_path, want in leaves:
        name = leaf_name(key_path)
        got = arrays.get(name)
        shape, dtype = want.shape, np.dtype(want.dtype)
        if got is None or (got.shape, got.dtype) != (tuple(shape), dtype):
            resized = got is not None and got.ndim == len(shape) > 0
            if resized and got.shape[1:] == tuple(shape[1:]):
                raise RunDirError(
                    f"{path}: holds a population of {got.shape[0]}, this search "
                    f"makes {shape[0]} (its members padded to a multiple of the "
                    "devices): resume with the device count it started with "
                    "(--cpu-devices) and the same members"
                )
            held = "nothing" if got is None else f"{list(got.shape)} {got.dtype}"
            raise RunDirError(
                f"{path}: holds {held} as {name}, not {list(shape)} {dtype}; "
                "was the sweep's request or this version changed?"
            )
        values.append(got)
    return jax.tree_util.tree_unflatten(treedef, values), lineage
