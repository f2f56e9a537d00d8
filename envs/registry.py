"""Name → environment constructor, with one-line errors for unknown names.

Besides ``register``, a backend that is not installed (brax) or an env left out
on purpose can ``register_unavailable`` a name prefix or a name with the reason:
``make`` then says what to install instead of listing close matches.

``make`` also takes entry strings (``"package.module:factory"``) and the names
installed distributions declare in the entry-point group ``ondevice_rl.envs``,
read on the first unknown name or by ``load_plugins`` (``envs/entry.py``).
"""

import difflib
import warnings
from collections.abc import Callable
from typing import Any

from ondevice_rl.env.types import Environment
from ondevice_rl.envs.entry import (
    EnvEntryError,
    Plugin,
    is_entry_string,
    make_from_entry,
    plugins,
)

_REGISTRY: dict[str, Callable[..., Environment]] = {}
_UNAVAILABLE: dict[str, str] = {}  # name or "prefix/" -> one-line reason
_PLUGINS: dict[str, Plugin] = {}  # names from installed distributions
_PLUGINS_READ = False


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
    """All registered environment names (and the plugins' once read), sorted."""
    return sorted([*_REGISTRY, *_PLUGINS])


def load_plugins() -> list[Plugin]:
    """Reads the ``ondevice_rl.envs`` entry points once (nothing is imported
    until a name is made) and returns the plugins registered. A name already
    taken or an entry that is not ``module:factory`` is skipped with one
    warning naming its distribution."""
    global _PLUGINS_READ
    if not _PLUGINS_READ:
        _PLUGINS_READ = True
        for plugin in plugins():
            problem = None
            if plugin.name in _REGISTRY or plugin.name in _PLUGINS:
                problem = f"the name {plugin.name!r} is taken"
            elif not is_entry_string(plugin.entry):
                problem = f"{plugin.entry!r} is not 'package.module:factory'"
            if problem is None:
                _PLUGINS[plugin.name] = plugin
            else:
                warnings.warn(
                    f"environment plugin of {plugin.distribution} skipped: {problem}",
                    stacklevel=2,
                )
    return list(_PLUGINS.values())


def plugin_of(name: str) -> Plugin | None:
    """The plugin that declares ``name`` (None for built-in names)."""
    return _PLUGINS.get(name)


def unknown_message(name: str) -> str:
    """One line: why ``name`` cannot be made, or the close matches."""
    for key, reason in _UNAVAILABLE.items():
        if name == key or (key.endswith("/") and name.startswith(key)):
            return f"environment {name!r} is unavailable: {reason}"
    known = names()
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.4)
    if "/" in name and not close:  # "gymnax/breakout" -> "gymnax/Breakout-MinAtar"
        prefix, _, rest = name.partition("/")
        same = [n for n in known if n.startswith(prefix + "/")]
        by_id = {n.partition("/")[2].lower(): n for n in same}
        found = difflib.get_close_matches(rest.lower(), by_id, n=3, cutoff=0.3)
        close = [by_id[f] for f in found]
    if close:
        return (
            f"unknown environment {name!r}. Did you mean: {', '.join(close)}? "
            f"(`ondevice-rl envs` lists all {len(known)})"
        )
    return (
        f"unknown environment {name!r}. Registered: {', '.join(known)}. "
        "(An environment of your own: 'package.module:factory'.)"
    )


def make(name: str, **kwargs: Any) -> tuple[Environment, Any]:
    """Builds an environment and its default params: ``env, params = make(id)``.

    ``name`` is a registered name, a plugin's, or an entry string
    ``"package.module:factory"`` (``envs/entry.py``); ``kwargs`` go to the
    factory.

    Raises:
        KeyError: unknown name; the one-line message lists close matches, or
            says what to install for an adapter whose backend is missing.
        EnvEntryError: (a ValueError) an entry string or plugin that gives
            no environment; one line naming what is wrong.
    """
    if is_entry_string(name):
        return make_from_entry(name, **kwargs)
    if name not in _REGISTRY and name not in _PLUGINS:
        load_plugins()
    if name in _PLUGINS:
        plugin = _PLUGINS[name]
        try:
            return make_from_entry(plugin.entry, name, **kwargs)
        except EnvEntryError as e:
            raise EnvEntryError(
                f"environment {name!r} of {plugin.distribution}: {e}"
            ) from e
    if name not in _REGISTRY:
        raise KeyError(unknown_message(name))
    env = _REGISTRY[name](**kwargs)
    return env, env.default_params()
