"""The final parameters a sweep keeps of each member, and reading them back.

``members/params-<first>-<n>.npz`` holds, for each member ``i`` of a
finished chunk (or of a search's final population):

* ``i/spec``: the member's run spec (``RunSpec.to_json``: learner, config,
  hyperparameters, seed, env params) as UTF-8 JSON bytes;
* ``i/<path>``: every leaf of its final ``PolicyParams`` (what acting needs:
  the network's parameters and any observation statistics), named by its
  tree path (``network/params/Dense_0/kernel``).

Files are written atomically by the process holding the directory's lock,
before the chunk's metrics (so a finished chunk always has its parameters).
``read_member`` reads one member's arrays whole (zip CRCs checked); the
caller checks them against the shapes the member's config gives
(``ondevice_rl.train.use.loading.load_run``). Errors are one line naming the
file.
"""

import contextlib
import json
import zipfile
import zlib
from pathlib import Path
from typing import Any

import jax
import numpy as np

from ondevice_rl.train.run.artifacts import RunDirError
from ondevice_rl.train.services.writes import write_whole

PARAMS_GLOB = "params-*.npz"
SPEC_KEY = "spec"


def leaf_name(path: tuple) -> str:
    """A tree path as the name its array is stored under."""
    return jax.tree_util.keystr(path, simple=True, separator="/")


def params_arrays(params: Any) -> dict[str, np.ndarray]:
    """``{leaf name: host array}`` of a ``PolicyParams`` tree."""
    leaves = jax.tree_util.tree_flatten_with_path(params)[0]
    return {leaf_name(path): np.asarray(x) for path, x in leaves}


def member_spec(
    config: Any, seed: int, env_params: dict | None, params_finite: bool
) -> dict:
    """What ``i/spec`` holds: ``RunSpec.to_json`` of a run of ``config``
    (hyperparameters included) and whether its final parameters are finite."""
    from ondevice_rl.train.run.run_spec import RunSpec

    spec = RunSpec(
        config, config.hyperparams, int(seed), env_params or None, config.num_updates
    )
    return dict(spec.to_json(), params_finite=bool(params_finite))


def save_params(folder: Path, members: dict[int, tuple[dict, Any]]) -> Path | None:
    """Writes ``params-<first>-<n>.npz`` into ``folder`` for ``members``
    (index -> ``(spec json, PolicyParams)``); returns its path."""
    if not members:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {}
    for index, (spec, params) in members.items():
        arrays[f"{index}/{SPEC_KEY}"] = np.frombuffer(
            json.dumps(spec).encode(), np.uint8
        )
        for name, value in params_arrays(params).items():
            arrays[f"{index}/{name}"] = value
    return save_npz(folder / f"params-{min(members)}-{len(members)}.npz", arrays)


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> Path:
    """Writes ``arrays`` to ``path`` atomically: a kill or a full disk leaves
    the old file or the new one, never half of one."""
    return write_whole(path, lambda tmp: np.savez(tmp, **arrays))


def _indices(path: Path) -> set[int]:
    """The members a params file holds (its zip directory only)."""
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
    return {int(n.split("/")[0]) for n in names if n.split("/")[0].isdigit()}


def member_indices(folder: Path) -> dict[int, Path]:
    """Every member whose parameters ``folder`` holds -> its file (a file
    whose directory cannot be read is skipped; reading it names it)."""
    found = {}
    for path in sorted(folder.glob(PARAMS_GLOB)):
        with contextlib.suppress(OSError, zipfile.BadZipFile, ValueError):
            found.update(dict.fromkeys(_indices(path), path))
    return found


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` file, read whole so that its CRCs are
    checked; ``ValueError`` saying why it cannot be."""
    try:
        with np.load(path) as data:
            return {key: data[key] for key in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as e:
        raise ValueError(str(e) or type(e).__name__) from None


def read_params_file(path: Path) -> dict[int, dict[str, np.ndarray]]:
    """Every member of one params file (index -> name -> array), read whole
    so that its CRCs are checked; ``ValueError`` saying why it is damaged."""
    members: dict[int, dict[str, np.ndarray]] = {}
    for key, value in read_npz(path).items():
        index, _, name = key.partition("/")
        if not index.isdigit() or not name:
            raise ValueError(f"unexpected array {key!r}")
        members.setdefault(int(index), {})[name] = value
    for index, named in members.items():
        if SPEC_KEY not in named:
            raise ValueError(f"member {index} has no {SPEC_KEY}")
    return members


def read_member(folder: Path, index: int) -> tuple[dict, dict[str, np.ndarray]]:
    """``(spec json, {leaf name: array})`` of member ``index`` kept in
    ``folder`` (``RunDirError``, one line, if it is not there or damaged)."""
    path = member_indices(folder).get(index)
    if path is None:
        raise RunDirError(f"{folder}: no parameters of member {index} kept there")
    try:
        named = dict(read_params_file(path)[index])
        spec = json.loads(named.pop(SPEC_KEY).tobytes().decode())
        if not isinstance(spec, dict):
            raise ValueError("its spec is not an object")
    except (ValueError, UnicodeDecodeError) as e:
        raise RunDirError(f"{path}: damaged ({e})") from None
    return spec, named
