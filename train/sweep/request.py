"""A sweep's request as its directory keeps it: ``sweep.json``.

What was asked (learner, env, recipe and base config, seeds, search, env
params, sampling, a strategy's settings and rounds, chunking, devices),
enough to rebuild the same plan: ``ondevice-rl sweep --resume`` reads it
back (a damaged one is one line naming it) and refuses a flag that differs
from it. Random ranges are stored as ``{"loguniform": [low, high]}``,
tuples (``hidden``) as lists. After the first chunk of each static group,
the chunk sizes used so far are added, for a resume to use the same ones
(a member's numbers depend on the size of the chunk it is vmapped in).
"""

from pathlib import Path
from typing import Any

from ondevice_rl.train.kit.config import config_from_dict
from ondevice_rl.train.kit.registry import algorithm_of, get_algorithm
from ondevice_rl.train.run.artifacts import RunDirError, read_json, write_json
from ondevice_rl.train.sweep.plan import SweepPlan, build_plan
from ondevice_rl.train.sweep.programs import program_config
from ondevice_rl.train.sweep.space import LogUniform, Uniform

SPEC_FILE = "sweep.json"
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
    """Writes ``sweep.json`` (see the module docstring)."""
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


def plan_of(request: dict) -> SweepPlan:
    """The plan a request asks for (checked: ``SweepSpecError``)."""
    algorithm = get_algorithm(request["algo"])
    base = dict(request.get("base") or {}, env=request["env"])
    return build_plan(
        config_from_dict(base, algorithm, where="the recipe's settings"),
        request["seeds"],
        request["search"],
        request["env_params"],
        request["samples"],
        request["sample_seed"],
    )


def with_chunk_sizes(request: dict, groups: list) -> dict:
    """``request`` plus each static group's chunk size so far (by the
    group's config), for a resume to use the same ones."""
    sizes = [{"config": g.config.to_dict(), "chunk_size": g.chunk_size} for g in groups]
    return dict(request, chunk_sizes=sizes)


def chunk_sizes(request: dict, plan: SweepPlan) -> dict:
    """The stored chunk sizes keyed by static config (see ``with_chunk_sizes``)."""
    algorithm = algorithm_of(plan.base)
    return {
        program_config(config_from_dict(g["config"], algorithm)): g["chunk_size"]
        for g in request.get("chunk_sizes", [])
    }
