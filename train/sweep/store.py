"""A sweep's directory while it runs: its request and its finished members.

* ``sweep.json``: what was asked (learner, base config, seeds, search, env
  params, sampling, chunking), enough to rebuild the same plan;
* ``members/chunk-*.npz``: the metrics of the members each finished chunk
  trained, written (atomically) as soon as the chunk ends, just after
  ``members/params-*.npz``, their final parameters (``member_files.py``).

``ondevice-rl sweep --resume OUT`` rebuilds the plan from ``sweep.json``,
loads the finished members and trains only the missing ones. Both files are
read through validating readers: a damaged ``sweep.json`` is one line
naming it; a chunk that cannot be read whole (zip CRCs checked) or does not
hold what the plan says, or whose members' parameters are missing or
damaged, is reported with why, for the resume to move it into
``members/damaged/`` and train its members again.
"""

import contextlib
import shutil
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from ondevice_rl.train.run.artifacts import RunDirError, read_json, write_json
from ondevice_rl.train.sweep import member_files
from ondevice_rl.train.sweep.space import LogUniform, Uniform

SPEC_FILE = "sweep.json"
MEMBERS_DIR = "members"
DAMAGED_DIR = "damaged"
#: ``sweep.json``'s fields and what each must be.
_FIELDS = {
    "algo": (str, "a learner's name"),
    "env": (str, "an env name"),
    "seeds": (int | list, "a count or a list of seeds"),
    "search": (dict, "an object"),
    "env_params": (dict, "an object"),
    "samples": (int | None, "an integer or null"),
    "sample_seed": (int, "an integer"),
    "base": (dict | None, "an object of config fields or null"),
    "strategy": (dict | None, "an object (a search strategy's settings) or null"),
    "round_updates": (int | None, "an integer or null"),
    "score_episodes": (int | None, "an integer or null"),
}


def _encode(value: Any) -> Any:
    if isinstance(value, Uniform | LogUniform):
        return {type(value).__name__.lower(): [value.low, value.high]}
    if isinstance(value, tuple | list):
        return [_encode(v) for v in value]
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        ((kind, (low, high)),) = value.items()
        return {"uniform": Uniform, "loguniform": LogUniform}[kind](low, high)
    if isinstance(value, list):
        return [tuple(v) if isinstance(v, list) else v for v in value]
    return value


def comparable(value: Any) -> Any:
    """A search value as ``sweep.json`` holds it (lists for tuples), to
    compare a flag with the stored request."""
    encoded = _encode(value)
    if isinstance(encoded, list):
        return [comparable(v) for v in encoded]
    return encoded


def save_request(out: Path, request: dict) -> None:
    """Writes ``sweep.json``: ``algo``, ``config`` (base config dict),
    ``seeds``, ``search``, ``env_params``, ``samples``, ``sample_seed``."""
    encoded = dict(request)
    encoded["search"] = {k: _encode(v) for k, v in request["search"].items()}
    encoded["env_params"] = {k: _encode(v) for k, v in request["env_params"].items()}
    write_json(out / SPEC_FILE, encoded)


def load_request(out: Path) -> dict:
    """``sweep.json`` back, checked, distributions and tuples restored
    (``RunDirError``, one line naming the file, if it is not a sweep's)."""
    path = out / SPEC_FILE
    if not path.is_file():
        raise RunDirError(f"--resume {out}: no {SPEC_FILE} there, not a sweep")
    request = read_json(path)
    for name, (kind, allowed) in _FIELDS.items():
        value = request.get(name)
        if isinstance(value, bool) or not isinstance(value, kind):
            raise RunDirError(f"{path}: {name} must be {allowed}, got {value!r}")
    try:
        for field in ("search", "env_params"):
            request[field] = {k: _decode(v) for k, v in request[field].items()}
    except (ValueError, TypeError, KeyError) as e:
        raise RunDirError(f"{path}: {field} holds a bad value ({e})") from None
    return request


def with_chunk_sizes(request: dict, groups: list) -> dict:
    """``request`` plus each static group's chunk size so far (by the
    group's config), for a resume to use the same ones."""
    sizes = [{"config": g.config.to_dict(), "chunk_size": g.chunk_size} for g in groups]
    return dict(request, chunk_sizes=sizes)


def chunk_sizes(request: dict, plan: Any) -> dict:
    """The stored chunk sizes keyed by static config (see ``with_chunk_sizes``)."""
    from ondevice_rl.train.kit.registry import algorithm_of
    from ondevice_rl.train.recipes.loader import config_from_dict
    from ondevice_rl.train.sweep.program import program_config

    algorithm = algorithm_of(plan.base)
    return {
        program_config(config_from_dict(g["config"], algorithm)): g["chunk_size"]
        for g in request.get("chunk_sizes", [])
    }


def save_members(out: Path, metrics: dict[int, dict[str, np.ndarray]]) -> None:
    """One ``members/chunk-<first>-<n>.npz`` holding these members' metrics."""
    if not metrics:
        return
    folder = out / MEMBERS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {f"{i}/{name}": v for i, m in metrics.items() for name, v in m.items()}
    member_files.save_npz(folder / f"chunk-{min(metrics)}-{len(metrics)}.npz", arrays)


def save_params(out: Path, result: Any, indices: Any) -> None:
    """``members/params-*.npz``: the final parameters of these finished
    members of ``result`` (a ``SweepResult``), each with its run spec."""
    members = {}
    for i in indices:
        m = result.plan.members[i]
        finite = result.params_finite[i] is not False
        spec = member_files.member_spec(m.config, m.seed, dict(m.env_params), finite)
        members[i] = (spec, result.params[i])
    member_files.save_params(out / MEMBERS_DIR, members)


def kept_params(out: Path) -> tuple[set[int], list[tuple[Path, str]]]:
    """The members whose parameters ``members/`` holds, read whole, and the
    params files that are damaged, each with why."""
    kept, damaged = set(), []
    for path in sorted((out / MEMBERS_DIR).glob(member_files.PARAMS_GLOB)):
        try:
            kept.update(member_files.read_params_file(path))
        except ValueError as e:
            damaged.append((path, str(e)))
    return kept, damaged


def read_chunk(path: Path) -> dict[int, dict[str, np.ndarray]]:
    """One chunk file's members (index -> name -> ``[U]``), read whole so
    that its CRCs are checked; ``ValueError`` saying why it is damaged."""
    members: dict[int, dict[str, np.ndarray]] = {}
    for key, values in member_files.read_npz(path).items():
        index, _, name = key.partition("/")
        if not index.isdigit() or not name or values.ndim != 1:
            raise ValueError(f"unexpected array {key!r} {values.shape}")
        members.setdefault(int(index), {})[name] = values
    if not members:
        raise ValueError("no members")
    return members


def load_members(
    out: Path, updates_of: Any = None
) -> tuple[dict[int, dict[str, np.ndarray]], list[tuple[Path, str]]]:
    """Every finished member's metrics found in ``members/``, and the chunk
    files that are damaged, each with why. ``updates_of(index)``: the
    number of updates member ``index`` trains (None: not in the plan)."""
    found: dict[int, dict[str, np.ndarray]] = {}
    damaged = []
    for path in sorted((out / MEMBERS_DIR).glob("chunk-*.npz")):
        try:
            members = read_chunk(path)
            for index, metrics in members.items():
                if updates_of is None:
                    continue
                updates = updates_of(index)
                if updates is None:
                    raise ValueError(f"member {index} is not in the plan")
                lengths = {len(v) for v in metrics.values()}
                if lengths != {updates}:
                    raise ValueError(f"member {index} has {lengths} updates")
        except ValueError as e:
            damaged.append((path, str(e)))
            continue
        found.update(members)
    return found, damaged


def set_aside(out: Path, path: Path) -> Path:
    """Moves a damaged chunk file into ``members/damaged/``; its new path."""
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
    ``out``, and one line per damaged chunk file, moved into
    ``members/damaged/`` (if ``move``) so that its members train again."""

    def updates_of(index: int) -> int | None:
        if 0 <= index < len(plan.members):
            return plan.members[index].config.num_updates
        return None

    finished, damaged = load_members(out, updates_of)
    kept, damaged_params = kept_params(out)
    for path in sorted((out / MEMBERS_DIR).glob("chunk-*.npz")):
        missing = sorted(set(read_chunk_indices(path)) - kept)
        if missing and all(p != path for p, _ in damaged):
            damaged.append((path, f"no parameters kept for member {missing[0]}"))
            for index in read_chunk_indices(path):
                finished.pop(index, None)
    notes = []
    for path, why in damaged + damaged_params:
        where = set_aside(out, path).parent if move else path.parent
        notes.append(
            f"{path}: damaged ({why}); moved to {where}, its members train again"
        )
    return finished, notes


def read_chunk_indices(path: Path) -> list[int]:
    """The members a chunk file names (its zip directory only)."""
    with contextlib.suppress(OSError, zipfile.BadZipFile, ValueError):
        with zipfile.ZipFile(path) as archive:
            names = {n.split("/")[0] for n in archive.namelist()}
        return sorted(int(n) for n in names if n.isdigit())
    return []
