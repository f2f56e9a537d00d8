"""A sweep's directory while it runs: its request and its finished members.

* ``sweep.json``: what was asked (learner, base config, seeds, search, env
  params, sampling), enough to rebuild the same plan;
* ``members/chunk-*.npz``: the metrics of the members each finished chunk
  trained, written (atomically) as soon as the chunk ends.

``ondevice-rl sweep --resume OUT`` rebuilds the plan from ``sweep.json``,
loads the finished members and trains only the missing ones.
"""

import os
from pathlib import Path
from typing import Any

import numpy as np

from ondevice_rl.train.run.artifacts import RunDirError, read_json, write_json
from ondevice_rl.train.sweep.space import LogUniform, Uniform

SPEC_FILE = "sweep.json"
MEMBERS_DIR = "members"


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


def save_request(out: Path, request: dict) -> None:
    """Writes ``sweep.json``: ``algo``, ``config`` (base config dict),
    ``seeds``, ``search``, ``env_params``, ``samples``, ``sample_seed``."""
    encoded = dict(request)
    encoded["search"] = {k: _encode(v) for k, v in request["search"].items()}
    encoded["env_params"] = {k: _encode(v) for k, v in request["env_params"].items()}
    write_json(out / SPEC_FILE, encoded)


def load_request(out: Path) -> dict:
    """``sweep.json`` back, distributions and tuples restored."""
    path = out / SPEC_FILE
    if not path.is_file():
        raise RunDirError(f"--resume {out}: no {SPEC_FILE} there, not a sweep")
    request = read_json(path)
    request["search"] = {k: _decode(v) for k, v in request["search"].items()}
    request["env_params"] = {k: _decode(v) for k, v in request["env_params"].items()}
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
    first = min(metrics)
    arrays = {f"{i}/{name}": v for i, m in metrics.items() for name, v in m.items()}
    path = folder / f"chunk-{first}-{len(metrics)}.npz"
    tmp = folder / f".tmp-{first}.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


def load_members(out: Path) -> dict[int, dict[str, np.ndarray]]:
    """Every finished member's metrics found in ``members/``."""
    found: dict[int, dict[str, np.ndarray]] = {}
    for path in sorted((out / MEMBERS_DIR).glob("chunk-*.npz")):
        with np.load(path) as data:
            for key in data.files:
                index, name = key.split("/", 1)
                found.setdefault(int(index), {})[name] = data[key]
    return found
