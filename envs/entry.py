"""Environments from outside this package: entry strings and entry points.

An entry string ``"package.module:factory"`` names a callable (or the
environment itself) that ``make`` imports and calls with its keyword
arguments. What it returns is adapted to our protocol:

* an ``Environment`` → itself, params ``env.default_params()``;
* a gymnax-style environment (``reset_env``/``step_env``) → ``GymnaxAdapter``;
* an ``(env, params)`` pair of either kind → the same, with those params as
  the defaults.

Anything else, a module that cannot be imported or a missing attribute is an
``EnvEntryError``: one line naming what is wrong.

Installed packages name environments through the entry-point group
``ondevice_rl.envs``: each entry point's name is an environment name, its
value an entry string, e.g. in the package's ``pyproject.toml``::

    [project.entry-points."ondevice_rl.envs"]
    "taxi_port/Taxi-v4" = "taxi_port.env:make_taxi"

Nothing is imported until that name is made.
"""

import difflib
import importlib
import re
from importlib.metadata import entry_points
from typing import Any, NamedTuple

from ondevice_rl.env.types import Environment
from ondevice_rl.env.wrappers import Wrapper
from ondevice_rl.envs.gymnax_adapter import GymnaxAdapter, is_gymnax_style

ENTRY_POINT_GROUP = "ondevice_rl.envs"
_DOTTED = r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*"
_ENTRY = re.compile(rf"^(?P<module>{_DOTTED}):(?P<attr>{_DOTTED})$")


class EnvEntryError(ValueError):
    """An entry string that does not give an environment (one-line message)."""


def is_entry_string(name: str) -> bool:
    """Whether ``name`` is meant as ``"package.module:factory"``."""
    return ":" in name


def import_entry(entry: str) -> Any:
    """The object ``"package.module:name"`` names (EnvEntryError, one line,
    if it cannot be imported)."""
    match = _ENTRY.match(entry.strip())
    if match is None:
        raise EnvEntryError(
            f"{entry!r} is not an entry string 'package.module:factory'"
        )
    module_name, attr = match["module"], match["attr"]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name is not None and (module_name + ".").startswith(e.name + "."):
            raise EnvEntryError(
                f"cannot import {entry!r}: no module named {e.name!r} (is its "
                "folder on PYTHONPATH?)"
            ) from e
        raise EnvEntryError(f"importing {module_name} failed: {_first_line(e)}") from e
    except Exception as e:  # the module's own code raised on import
        raise EnvEntryError(f"importing {module_name} failed: {_first_line(e)}") from e
    obj = module
    for i, part in enumerate(attr.split(".")):
        if not hasattr(obj, part):
            where = ".".join([module_name, *attr.split(".")[:i]])
            known = [n for n in dir(obj) if not n.startswith("_")]
            close = difflib.get_close_matches(part, known, n=2, cutoff=0.6)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise EnvEntryError(
                f"{where} has no attribute {part!r}{hint}, as {entry!r} needs"
            )
        obj = getattr(obj, part)
    return obj


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


def _is_env(obj: Any) -> bool:
    return isinstance(obj, Environment) or is_gymnax_style(obj)


def make_from_entry(entry: str, name: str | None = None, **kwargs: Any):
    """``(env, params)`` from an entry string; ``name`` (default: the entry
    string) names the env where it has no name of its own.

    Raises:
        EnvEntryError: one line: unparsable string, module not importable,
            attribute missing, factory raising, or an unusable return value.
    """
    name = name or entry
    target = import_entry(entry)
    if _is_env(target):
        made = target
    elif callable(target):
        try:
            made = target(**kwargs)
        except Exception as e:
            raise EnvEntryError(f"{entry}() raised {_first_line(e)}") from e
    else:
        raise EnvEntryError(
            f"{entry} is a {type(target).__name__}, not a callable returning an "
            "environment"
        )
    return adapt(made, entry, name)


def adapt(made: Any, entry: str, name: str) -> tuple[Environment, Any]:
    """``(env, params)`` of what a factory returned (see the module doc)."""
    params = None
    if isinstance(made, tuple) and len(made) == 2 and _is_env(made[0]):
        made, params = made
    if isinstance(made, Environment):
        if made.name == Environment.name:  # the base class's placeholder
            made.name = name
        if params is None:
            return made, made.default_params()
        return WithParams(made, params), params
    if is_gymnax_style(made):
        try:
            env = GymnaxAdapter(made, params, name=name)
        except ValueError as e:
            raise EnvEntryError(str(e)) from e
        return env, env.default_params()
    raise EnvEntryError(
        f"{entry} returned {_describe(made)}, not an ondevice_rl Environment, a "
        "gymnax-style environment (reset_env/step_env) or an (env, params) pair"
    )


def _describe(obj: Any) -> str:
    if isinstance(obj, tuple):
        kinds = ", ".join(type(x).__name__ for x in obj)
        return f"a tuple ({kinds})"
    return f"a {type(obj).__name__}"


class WithParams(Wrapper):
    """An environment whose default params are the ones its factory gave."""

    def __init__(self, env: Environment, params: Any):
        super().__init__(env)
        self.PARAM_RANGES = env.PARAM_RANGES
        self._params = params

    def default_params(self) -> Any:
        return self._params

    def observe(self, state: Any, params: Any) -> Any:
        return self.env.observe(state, params)


class Plugin(NamedTuple):
    """One environment an installed distribution names."""

    name: str  # the environment's name
    entry: str  # its entry string
    distribution: str  # the distribution declaring it


def plugins() -> list[Plugin]:
    """The ``ondevice_rl.envs`` entry points of the installed distributions
    (read from their metadata; nothing imported)."""
    found = []
    for point in entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(point, "dist", None)
        found.append(Plugin(point.name, point.value, dist.name if dist else "?"))
    return found
