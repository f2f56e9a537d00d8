"""The one cache of compiled programs in a process.

Segmented runs (``runner.py``) and sweeps (``sweep/programs.py``) ask
``PROGRAMS.get(key, build)`` for what they need; ``key`` names the program
(kind, static config, shapes, segment or chunk length, mesh, compiler
options) and ``build()`` compiles it on first use. New traced values never
change a key, so they never recompile. The least recently used programs are
dropped beyond ``max_size``.
"""

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Any

import jax
import jax.numpy as jnp


class ProgramCache:
    """Compiled programs by key; ``compiles`` counts the builds.

    ``compiler_options`` (e.g. ``{"xla_backend_optimization_level": 0}``,
    a few times faster to compile on CPU and slower to run: worth it for
    tiny populations such as tests) go to XLA for every program built
    through this cache; they are part of every key.
    """

    def __init__(
        self, compiler_options: dict[str, Any] | None = None, max_size: int = 32
    ):
        self._programs: OrderedDict[tuple, Any] = OrderedDict()
        self.compiles = 0
        self.compiler_options = compiler_options
        self.max_size = max_size

    def __len__(self) -> int:
        return len(self._programs)

    def __contains__(self, key: Hashable) -> bool:
        """Whether the program under ``key`` is compiled (current options)."""
        return self._full_key(key) in self._programs

    def clear(self) -> None:
        self._programs.clear()

    def _full_key(self, key: Hashable) -> tuple:
        return (key, tuple(sorted((self.compiler_options or {}).items())))

    def get(self, key: Hashable, build: Callable[[dict | None], Any]) -> Any:
        """The program under ``key``; ``build(compiler_options)`` makes it
        the first time."""
        full = self._full_key(key)
        if full in self._programs:
            self._programs.move_to_end(full)
            return self._programs[full]
        program = build(self.compiler_options)
        self.compiles += 1
        self._programs[full] = program
        while len(self._programs) > self.max_size:
            self._programs.popitem(last=False)
        return program

    def entries(self) -> Iterator[tuple[Hashable, Any]]:
        """``(key, program)`` pairs compiled with the current options."""
        options = self._full_key(None)[1]
        for (key, opts), program in list(self._programs.items()):
            if opts == options:
                yield key, program


def avals(tree: Any) -> tuple:
    """A hashable signature of ``tree``'s structure, shapes and dtypes."""
    leaves, treedef = jax.tree.flatten(tree)
    return treedef, tuple((jnp.shape(x), jnp.result_type(x)) for x in leaves)


#: Shared by segmented runs and sweeps unless one passes its own cache.
PROGRAMS = ProgramCache()
