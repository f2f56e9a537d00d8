"""A sweep directory's finished members: their metrics and final parameters.

``members/`` holds, for the members of each finished chunk (a search: of
its final population):

* ``params-<first>-<n>.npz``: for each member ``i``, ``i/spec`` (its run
  spec, ``RunSpec.to_json``: learner, config, hyperparameters, seed, env
  params, and whether its parameters are finite, as UTF-8 JSON bytes) and
  ``i/<path>``, every leaf of its final ``PolicyParams`` (what acting needs:
  the network's parameters and any observation statistics) named by its
  tree path (``network/params/Dense_0/kernel``);
* ``chunk-<first>-<n>.npz`` (sweeps): ``i/<metric>``, each member's
  per-update metrics, written just after its parameters, so that a finished
  chunk on disk always has them.

Files are written atomically by the process holding the directory's lock.
Readers take a file whole (zip CRCs checked): ``read_member`` one member's
parameters (``ondevice_rl.train.use.loading.load_run`` checks them against
the shapes its spec gives; errors are one line naming the file), and
``finished_members`` what a resumed sweep need not train again, a damaged
chunk (unreadable, not what the plan says, its parameters missing or
damaged) moved into ``members/damaged/`` with why, its members trained
again.
"""

import contextlib
import json
import shutil
import zipfile
import zlib
from pathlib import Path
from typing import Any

import jax
import numpy as np

from ondevice_rl.train.run.artifacts import RunDirError
from ondevice_rl.train.run.run_spec import RunSpec
from ondevice_rl.train.services.writes import write_whole
from ondevice_rl.train.sweep.space import shortest

MEMBERS_DIR = "members"
DAMAGED_DIR = "damaged"
PARAMS_GLOB = "params-*.npz"
CHUNK_GLOB = "chunk-*.npz"
SPEC_KEY = "spec"


def leaf_name(path: tuple) -> str:
    """A tree path as the name its array is stored under."""
    return jax.tree_util.keystr(path, simple=True, separator="/")


def named_arrays(tree: Any) -> dict[str, np.ndarray]:
    """``{leaf name: host array}`` of a tree."""
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {leaf_name(path): np.asarray(x) for path, x in leaves}


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> Path:
    """Writes ``arrays`` to ``path`` atomically: a kill or a full disk leaves
    the old file or the new one, never half of one."""
    return write_whole(path, lambda tmp: np.savez(tmp, **arrays))


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` file, read whole so that its CRCs are
    checked; ``ValueError`` saying why it cannot be."""
    try:
        with np.load(path) as data:
            return {key: data[key] for key in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as e:
        raise ValueError(str(e) or type(e).__name__) from None


def _save_members(folder: Path, kind: str, arrays: dict[int, dict]) -> Path | None:
    """``<kind>-<first>-<n>.npz`` of members' named arrays (index -> name
    -> array) in ``folder``."""
    if not arrays:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    flat = {
        f"{i}/{name}": v for i, named in arrays.items() for name, v in named.items()
    }
    return save_npz(folder / f"{kind}-{min(arrays)}-{len(arrays)}.npz", flat)


def _read_members(path: Path) -> dict[int, dict[str, np.ndarray]]:
    """A members file whole, as index -> name -> array; ``ValueError``
    saying why it is damaged."""
    members: dict[int, dict[str, np.ndarray]] = {}
    for key, value in read_npz(path).items():
        index, _, name = key.partition("/")
        if not index.isdigit() or not name:
            raise ValueError(f"unexpected array {key!r}")
        members.setdefault(int(index), {})[name] = value
    if not members:
        raise ValueError("no members")
    return members


def _indices(path: Path) -> list[int]:
    """The members a file names (its zip directory only; none if unreadable)."""
    with contextlib.suppress(OSError, zipfile.BadZipFile, ValueError):
        with zipfile.ZipFile(path) as archive:
            names = {n.split("/")[0] for n in archive.namelist()}
        return sorted(int(n) for n in names if n.isdigit())
    return []


# --- writing ----------------------------------------------------------------------


def save_params(out: Path, result: Any, indices: Any) -> Path | None:
    """``members/params-*.npz``: the final parameters of these members of
    ``result`` (a ``SweepResult``), each with its run spec (after a search,
    its final hyperparameters)."""
    lineage, members = result.lineage, {}
    for i in indices:
        m = result.plan.members[i]
        config = m.config
        if lineage is not None:
            config = config.replace(
                **{k: shortest(v[i]) for k, v in lineage.hp.items()}
            )
        spec = RunSpec(
            config, config.hyperparams, int(m.seed), dict(m.env_params) or None,
            config.num_updates,
        )  # fmt: skip
        finite = result.params_finite[i] is not False
        text = json.dumps(dict(spec.to_json(), params_finite=finite)).encode()
        members[i] = {SPEC_KEY: np.frombuffer(text, np.uint8)}
        members[i].update(named_arrays(result.params[i]))
    return _save_members(out / MEMBERS_DIR, "params", members)


def save_metrics(out: Path, metrics: dict[int, dict[str, np.ndarray]]) -> None:
    """One ``members/chunk-<first>-<n>.npz`` holding these members' metrics."""
    _save_members(out / MEMBERS_DIR, "chunk", metrics)


# --- reading ----------------------------------------------------------------------


def member_files(folder: Path) -> dict[int, Path]:
    """Every member whose parameters ``folder`` holds -> its file (a file
    whose directory cannot be read is skipped; reading it names it)."""
    found = {}
    for path in sorted(folder.glob(PARAMS_GLOB)):
        found.update(dict.fromkeys(_indices(path), path))
    return found


def read_member(folder: Path, index: int) -> tuple[dict, dict[str, np.ndarray]]:
    """``(spec json, {leaf name: array})`` of member ``index`` kept in
    ``folder`` (``RunDirError``, one line, if it is not there or damaged)."""
    path = member_files(folder).get(index)
    if path is None:
        raise RunDirError(f"{folder}: no parameters of member {index} kept there")
    try:
        named = dict(_read_members(path)[index])
        if SPEC_KEY not in named:
            raise ValueError(f"member {index} has no {SPEC_KEY}")
        spec = json.loads(named.pop(SPEC_KEY).tobytes().decode())
        if not isinstance(spec, dict):
            raise ValueError("its spec is not an object")
    except (ValueError, UnicodeDecodeError) as e:
        raise RunDirError(f"{path}: damaged ({e})") from None
    return spec, named


def _checked_files(out: Path, glob: str, check) -> tuple[dict, list]:
    """Members of every ``glob`` file in ``members/`` whose contents pass
    ``check(index, named)``, and the damaged files, each with why."""
    found, damaged = {}, []
    for path in sorted((out / MEMBERS_DIR).glob(glob)):
        try:
            members = _read_members(path)
            for index, named in members.items():
                check(index, named)
        except ValueError as e:
            damaged.append((path, str(e)))
            continue
        found.update(members)
    return found, damaged


def _set_aside(out: Path, path: Path) -> Path:
    """Moves a damaged file into ``members/damaged/``; its new path."""
    folder = out / MEMBERS_DIR / DAMAGED_DIR
    folder.mkdir(exist_ok=True)
    target, n = folder / path.name, 0
    while target.exists():
        n += 1
        target = folder / f"{path.stem}-{n}{path.suffix}"
    shutil.move(path, target)
    return target


def finished_members(out: Path, plan: Any, move: bool = True) -> tuple[dict, list]:
    """``(finished, notes)``: the members of ``plan`` already trained in
    ``out`` (index -> metrics), and one line per damaged file, moved into
    ``members/damaged/`` (if ``move``) so that its members train again."""

    def check_metrics(index: int, metrics: dict) -> None:
        if not 0 <= index < len(plan.members):
            raise ValueError(f"member {index} is not in the plan")
        for name, values in metrics.items():
            if values.ndim != 1:
                raise ValueError(f"unexpected array '{index}/{name}' {values.shape}")
        lengths = {len(v) for v in metrics.values()}
        if lengths != {plan.members[index].config.num_updates}:
            raise ValueError(f"member {index} has {lengths} updates")

    def check_params(index: int, named: dict) -> None:
        if SPEC_KEY not in named:
            raise ValueError(f"member {index} has no {SPEC_KEY}")

    finished, damaged = _checked_files(out, CHUNK_GLOB, check_metrics)
    kept, damaged_params = _checked_files(out, PARAMS_GLOB, check_params)
    for path in sorted((out / MEMBERS_DIR).glob(CHUNK_GLOB)):
        missing = sorted(set(_indices(path)) - set(kept))
        if missing and all(p != path for p, _ in damaged):
            damaged.append((path, f"no parameters kept for member {missing[0]}"))
            for index in _indices(path):
                finished.pop(index, None)
    notes = []
    for path, why in damaged + damaged_params:
        where = _set_aside(out, path).parent if move else path.parent
        notes.append(
            f"{path}: damaged ({why}); moved to {where}, its members train again"
        )
    return finished, notes
