"""Reading ``ondevice-rl sweep``'s value specs: comma lists (grids),
``uniform:LOW:HIGH`` / ``loguniform:LOW:HIGH`` (random), seeds, byte sizes."""

import json
import math
import re
import sys

from ondevice_rl.train.cli.args import flag_name, parse_int
from ondevice_rl.train.services.interrupt import EXIT_STATUS
from ondevice_rl.train.sweep.request import comparable
from ondevice_rl.train.sweep.space import LogUniform, SweepSpecError, Uniform

_RANDOM = re.compile(r"^(uniform|loguniform):([^:]+):([^:]+)$")


class CLIError(ValueError):
    """A bad command line (printed as one line, exit status 2)."""


def _number(flag: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise CLIError(f"{flag}: cannot read {text!r} as a number") from None


def parse_spec(flag: str, text: str, kind=float):
    """A flag's value → list of values, or a ``Uniform``/``LogUniform``.

    ``kind`` is ``float``, ``int``, ``bool``, ``str`` or ``"hidden"``
    (``64x64`` = two layers of 64).
    """
    text = text.strip()
    if text.startswith(("uniform", "loguniform")):
        match = _RANDOM.match(text)
        if not match:
            raise CLIError(
                f"{flag}: expected uniform:LOW:HIGH or loguniform:LOW:HIGH, "
                f"got {text!r}"
            )
        if kind is not float:
            raise CLIError(f"{flag}: random ranges are only for float values")
        name, low, high = match.groups()
        dist = Uniform if name == "uniform" else LogUniform
        try:
            return dist(_number(flag, low), _number(flag, high))
        except SweepSpecError as err:
            raise CLIError(f"{flag}: {err}") from None
    items = [t.strip() for t in text.split(",")]
    if not text or any(not t for t in items):
        raise CLIError(f"{flag}: empty value in {text!r}")
    values = []
    for item in items:
        if kind is float:
            values.append(_number(flag, item))
        elif kind is int:
            try:
                values.append(parse_int(item))
            except ValueError:
                raise CLIError(f"{flag}: expected integers, got {item!r}") from None
        elif kind is bool:
            if item.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise CLIError(f"{flag}: expected true/false, got {item!r}")
            values.append(item.lower() in ("true", "1", "yes"))
        elif kind == "hidden":
            if not re.fullmatch(r"\d+(x\d+)*", item):
                raise CLIError(f"{flag}: expected widths like 64x64, got {item!r}")
            values.append(tuple(int(w) for w in item.split("x")))
        else:
            values.append(item)
    return values


def with_changes(values: dict, changes: list[str]) -> dict:
    """``values`` with ``--set FIELD=VALUE`` changes (JSON values, else the
    text)."""
    values = dict(values)
    for item in changes:
        name, sep, text = item.partition("=")
        if not sep or not name.strip():
            raise CLIError(f"--set {item!r}: write FIELD=VALUE")
        try:
            values[name.strip()] = json.loads(text)
        except ValueError:
            values[name.strip()] = text
    return values


def parse_seeds(text: str) -> int | list[int]:
    """``"4"`` → 4 seeds (0..3); ``"0,5,9"`` → those seeds."""
    if "," in text:
        return parse_spec("--seeds", text, int)
    if not re.fullmatch(r"\d+", text.strip()) or int(text) < 1:
        raise CLIError(f"--seeds: expected a count >= 1 or a comma list, got {text!r}")
    return int(text)


def parse_bytes(text: str) -> int:
    """``"512M"``, ``"2G"``, ``"1e9"`` → bytes."""
    match = re.fullmatch(r"\s*([0-9.eE+]+)\s*([kKmMgGtT]?)i?[bB]?\s*", text)
    if not match:
        raise CLIError(f"--memory-budget: cannot read {text!r} (e.g. 512M, 2G)")
    try:
        number = float(match.group(1))
    except ValueError:
        raise CLIError(f"--memory-budget: cannot read {text!r}") from None
    scale = 1024 ** " KMGT".index(match.group(2).upper() or " ")
    if not math.isfinite(number * scale):
        raise CLIError(f"--memory-budget: {text!r} is not a finite size")
    return int(number * scale)


def given_flags(args, spec: dict) -> dict:
    """The flags on the command line that ``sweep.json`` also holds:
    flag -> (its field, the value read)."""
    given = {
        flag: (field, value)
        for flag, field, value in (
            ("--algo", "algo", args.algo),
            ("--env", "env", args.env),
            ("--recipe", "recipe", args.recipe),
            ("--strategy", "strategy", spec.get("strategy")),
            ("--round-updates", "round_updates", args.round_updates),
            ("--score-episodes", "score_episodes", args.score_episodes),
            ("--seeds", "seeds", args.seeds and spec["seeds"]),
            ("--samples", "samples", args.samples),
            ("--sample-seed", "sample_seed", args.sample_seed),
            ("--chunk-size", "chunk_size", args.chunk_size),
            ("--memory-budget", "memory_budget", spec["budget"]),
            ("--cpu-devices", "cpu_devices", args.cpu_devices),
        )
        if value is not None
    }
    for name, value in spec["search"].items():
        given[flag_name(name)] = (("search", name), value)
    for name, value in spec["env_params"].items():
        given[f"--env-param {name}"] = (("env_params", name), value)
    return given


def _seed_list(seeds) -> list[int]:
    return list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]


def resume_conflict(given: dict, stored: dict) -> str | None:
    """The first flag given beside ``sweep --resume`` whose value differs
    from the stored request's, as one line; None if all agree. ``given``:
    flag -> (the request's field, its value as read) for the flags on the
    command line (search flags as ``("search", name)``, env params as
    ``("env_params", name)``)."""
    for flag, (field, value) in given.items():
        if isinstance(field, tuple):
            group, name = field
            have = stored.get(group, {}).get(name)
        else:
            have = stored.get(field)
        if field == "seeds":
            value, have = _seed_list(value), _seed_list(have)
        if comparable(value) != comparable(have):
            shown = "not set" if have is None else comparable(have)
            return (
                f"{flag} {comparable(value)} would change the sweep being resumed "
                f"(stored: {shown}); a resumed sweep keeps its request"
            )
    return None


def interrupted(message: str, out, stop_signal: int | None) -> int:
    """Says what a stopped sweep kept and how to resume it; the exit status
    of the signal that stopped it (130 for Ctrl-C)."""
    print(
        f"interrupted: {message}; resume with: ondevice-rl sweep --resume --out {out}",
        file=sys.stderr,
    )
    return EXIT_STATUS.get(stop_signal, 130)
