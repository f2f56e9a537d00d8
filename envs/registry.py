"""Name → environment constructor, with one-line errors for unknown names.

Besides ``register``, a backend that is not installed (brax) or an env left out
on purpose can ``register_unavailable`` a name prefix or a name with the reason:
``make`` then says what to install instead of listing close matches.
"""

import difflib
from collections.abc import Callable
from typing import Any

from ondevice_rl.types import Environment

_REGISTRY: dict[str, Callable[..., Environment]] = {}
_UNAVAILABLE: dict[str, str] = {}  # name or "prefix/" -> one-line reason


def register(name: str, factory: Callable[..., Environment]) -> None:
    """Registers ``factory`` (called with ``make``'s keyword arguments)."""
    if name in _REGISTRY:
        raise ValueError(f"environment {name!r} is already registered")
    _REGISTRY[name] = factory


def register_unavailable(name_or_prefix: str, reason: str) -> None:
    """Marks a name (or every name starting with a prefix ending in ``/``) as
    not makeable here; ``make`` raises ``KeyError(reason)``."""
    _UNAVAILABLE[name_or_prefix] = reason


def names() -> list[str]:
    """All registered environment names, sorted."""
    return sorted(_REGISTRY)


def unknown_message(name: str) -> str:
    """One line: why ``name`` cannot be made, or the close matches."""
    for key, reason in _UNAVAILABLE.items():
        if name == key or (key.endswith("/") and name.startswith(key)):
            return f"environment {name!r} is unavailable: {reason}"
    close = difflib.get_close_matches(name, _REGISTRY, n=3, cutoff=0.4)
    if "/" in name and not close:  # "gymnax/breakout" -> "gymnax/Breakout-MinAtar"
        prefix, _, rest = name.partition("/")
        same = [n for n in _REGISTRY if n.startswith(prefix + "/")]
        by_id = {n.partition("/")[2].lower(): n for n in same}
        found = difflib.get_close_matches(rest.lower(), by_id, n=3, cutoff=0.3)
        close = [by_id[f] for f in found]
    if close:
        return (
            f"unknown environment {name!r}. Did you mean: {', '.join(close)}? "
            f"(`ondevice-rl envs` lists all {len(_REGISTRY)})"
        )
    return f"unknown environment {name!r}. Registered: {', '.join(names())}."


def make(name: str, **kwargs: Any) -> tuple[Environment, Any]:
    """Builds an environment and its default params: ``env, params = make(id)``.

    Raises:
        KeyError: unknown name; the one-line message lists close matches, or
            says what to install for an adapter whose backend is missing.
    """
    if name not in _REGISTRY:
        raise KeyError(unknown_message(name))
    env = _REGISTRY[name](**kwargs)
    return env, env.default_params()
