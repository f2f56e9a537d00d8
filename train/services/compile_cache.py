"""JAX's persistent compilation cache: one policy for ``ondevice-rl`` and
``ondevice_rl.run_training``.

On by default: compiled programs are kept in ``compilation_cache_dir()``
(``~/.cache/ondevice_rl/jax``, or ``$XDG_CACHE_HOME/ondevice_rl/jax``;
``ONDEVICE_RL_CACHE_DIR=DIR`` moves it, ``=off`` turns it off), so a fresh
process compiles a program it has compiled before in a fraction of the time.
``--no-compile-cache`` / ``compile_cache=False`` turns it off for a run.
The library itself (``train_from_config``, ``make_train``) leaves JAX's
settings alone: only the two entry points switch the cache on.
"""

import os
from pathlib import Path

CACHE_ENV = "ONDEVICE_RL_CACHE_DIR"
_OFF = ("", "0", "off", "none", "false")


def compilation_cache_dir() -> Path | None:
    """Where compiled programs are cached: ``$ONDEVICE_RL_CACHE_DIR`` (None if
    it is ``off``), else ``$XDG_CACHE_HOME/ondevice_rl/jax`` or
    ``~/.cache/ondevice_rl/jax``."""
    value = os.environ.get(CACHE_ENV)
    if value is not None:
        return None if value.strip().lower() in _OFF else Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "ondevice_rl" / "jax"


def use_compilation_cache(enabled: bool = True) -> Path | None:
    """Switches JAX's persistent compilation cache on (at
    ``compilation_cache_dir()``, unless that is off) or off for this
    process; returns the directory in use, or None."""
    import jax
    from jax.experimental.compilation_cache import compilation_cache

    path = compilation_cache_dir() if enabled else None
    current = jax.config.jax_compilation_cache_dir
    on = jax.config.jax_enable_compilation_cache
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        if current != str(path) or not on:
            compilation_cache.reset_cache()  # JAX decides once per process
            jax.config.update("jax_compilation_cache_dir", str(path))
            jax.config.update("jax_enable_compilation_cache", True)
    elif current is not None and on:
        compilation_cache.reset_cache()
        jax.config.update("jax_enable_compilation_cache", False)
    return path
