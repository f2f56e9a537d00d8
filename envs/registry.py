"""Name → environment constructor, with helpful errors for unknown names."""

import difflib
from collections.abc import Callable
from typing import Any

from ondevice_rl.types import Environment

_REGISTRY: dict[str, Callable[..., Environment]] = {}


def register(name: str, factory: Callable[..., Environment]) -> None:
    """Registers ``factory`` (called with ``make``'s keyword arguments)."""
    if name in _REGISTRY:
        raise ValueError(f"environment {name!r} is already registered")
    _REGISTRY[name] = factory


def names() -> list[str]:
    """All registered environment names, sorted."""
    return sorted(_REGISTRY)


def make(name: str, **kwargs: Any) -> tuple[Environment, Any]:
    """Builds an environment and its default params: ``env, params = make(id)``.

    Raises:
        KeyError: unknown name; the message lists close matches.
    """
    if name not in _REGISTRY:
        close = difflib.get_close_matches(name, _REGISTRY, n=3, cutoff=0.4)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise KeyError(
            f"unknown environment {name!r}.{hint} Registered: {', '.join(names())}."
        )
    env = _REGISTRY[name](**kwargs)
    return env, env.default_params()
