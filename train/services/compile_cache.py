"""JAX's persistent compilation cache: one policy for ``ondevice-rl`` and
``ondevice_rl.run_training``.

On by default: compiled programs are kept in ``compilation_cache_dir()``
(``~/.cache/ondevice_rl/jax``, or ``$XDG_CACHE_HOME/ondevice_rl/jax``;
``ONDEVICE_RL_CACHE_DIR=DIR`` moves it, ``=off`` turns it off), so a fresh
process compiles a program it has compiled before in a fraction of the time.
``--no-compile-cache`` / ``compile_cache=False`` turns it off for a run.
The library itself (``train_from_config``, ``make_train``) leaves JAX's
settings alone: only the two entry points switch the cache on.

A cache directory that cannot be written (a full disk, a read-only mount)
costs the run nothing but time: one warning line, and the run goes on
without the cache; so does a cache that fills up mid-run (JAX's own
warning per program becomes that one line). JAX writes an entry in place:
one cut short (a full disk, a killed process) is read as damaged and its
program compiled again, with one line per program saying which to delete.
"""

import os
import re
import sys
import tempfile
import warnings
from pathlib import Path

import jax
from jax.experimental.compilation_cache import compilation_cache

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
    path = compilation_cache_dir() if enabled else None
    current = jax.config.jax_compilation_cache_dir
    on = jax.config.jax_enable_compilation_cache
    if path is not None:
        try:
            path.mkdir(parents=True, exist_ok=True)
            tempfile.TemporaryFile(dir=path).close()
        except OSError as e:
            _warn_once(path, e.strerror or str(e))
            path = None
    if path is not None:
        _catch_failed_writes(path)
        if current != str(path) or not on:
            compilation_cache.reset_cache()  # JAX decides once per process
            jax.config.update("jax_compilation_cache_dir", str(path))
            jax.config.update("jax_enable_compilation_cache", True)
    elif current is not None and on:
        compilation_cache.reset_cache()
        jax.config.update("jax_enable_compilation_cache", False)
    return path


_warned: set = set()
_JAX_WRITE_FAILED = "Error writing persistent compilation cache entry"
_JAX_READ_FAILED = "Error reading persistent compilation cache entry"


def _warn_once(path: Path, reason: str) -> None:
    """One line per cache directory and process."""
    if path not in _warned:
        _warned.add(path)
        print(
            f"ondevice-rl: warning: cannot write the compile cache {path} "
            f"({reason}); going on without it",
            file=sys.stderr,
            flush=True,
        )


def _catch_failed_writes(path: Path) -> None:
    """JAX's warning for a cache entry it could not write (one per program)
    becomes ``_warn_once``'s line; other warnings pass as before."""
    shown = warnings.showwarning
    if getattr(shown, "cache_dir", None) is not None:
        shown.cache_dir = path
        return

    def showwarning(message, category, filename, lineno, file=None, line=None):
        text, where = str(message), showwarning.cache_dir
        damaged = re.match(_JAX_READ_FAILED + r" for '([^']+)'", text)
        if damaged and (where, damaged[1]) not in _warned:
            _warned.add((where, damaged[1]))
            print(
                f"ondevice-rl: warning: the compile cache {where} holds a damaged "
                f"entry for {damaged[1]} (a process stopped while writing it?); "
                f"compiling it again (delete {where}/{damaged[1]}-*-cache to "
                "stop this)",
                file=sys.stderr,
                flush=True,
            )
        if damaged:
            return None
        if not text.startswith(_JAX_WRITE_FAILED):
            return shown(message, category, filename, lineno, file, line)
        code = re.search(r"\[Errno (\d+)\]", text)
        reason = os.strerror(int(code[1])) if code else text.split(": ", 2)[-1]
        _warn_once(where, reason[:200])

    showwarning.cache_dir = path
    warnings.showwarning = showwarning
