"""Reading ``ondevice-rl sweep``'s value specs: comma lists (grids),
``uniform:LOW:HIGH`` / ``loguniform:LOW:HIGH`` (random), seeds, byte sizes."""

import re

from ondevice_rl.train.cli.args import parse_int

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
    from ondevice_rl.train.sweep import LogUniform, SweepSpecError, Uniform

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
    return int(number * scale)
