"""Counting host↔device transfers: by construction, and by reading a program.

``TransferCounter`` wraps ``jax.device_put`` / ``jax.device_get`` (and counts
host arrays handed to a jitted function, ``as_argument``); a loop that moves
data only through it has its transfers counted exactly. ``host_ops``
reads a lowered and/or compiled program's text for the operations that talk
to the host while it runs (Python callbacks, send/recv, infeed/outfeed, host
offloading): zero means the program runs start to end without the host.
"""

import re
from typing import Any

import jax

#: Operations through which a running XLA program reaches the host.
HOST_OP_PATTERNS = (
    r"xla_(?:ffi_)?python_(?:cpu|gpu)_callback",  # pure/io/debug callbacks
    r"\bstablehlo\.(?:send|recv|infeed|outfeed)\b",
    r"=\s*[\w\[\]{},:() ]*\b(?:send|recv|infeed|outfeed)(?:-done)?\(",  # HLO ops
    r"MoveTo(?:Host|Device)",  # host memory offloading annotations
)
_HOST_OP = re.compile("|".join(HOST_OP_PATTERNS))


class TransferCounter:
    """Counts ``put`` (host→device) and ``get`` (device→host) calls and arrays.

    Attributes:
        h2d, d2h: number of calls.
        h2d_arrays, d2h_arrays: number of array leaves moved.
    """

    def __init__(self) -> None:
        self.h2d = self.d2h = self.h2d_arrays = self.d2h_arrays = 0

    def put(self, tree: Any, sharding: Any = None) -> Any:
        """``jax.device_put(tree, sharding)``, counted as one transfer."""
        self.h2d += 1
        self.h2d_arrays += len(jax.tree.leaves(tree))
        return jax.device_put(tree, sharding)

    def as_argument(self, tree: Any) -> Any:
        """Counts host ``tree`` as one host→device transfer and returns it as
        is: a jitted function it is passed to copies it to the device (jit's
        fast path is cheaper than a separate ``device_put``)."""
        self.h2d += 1
        self.h2d_arrays += len(jax.tree.leaves(tree))
        return tree

    def get(self, tree: Any) -> Any:
        """``jax.device_get(tree)`` (NumPy out), counted as one transfer."""
        self.d2h += 1
        self.d2h_arrays += len(jax.tree.leaves(tree))
        return jax.device_get(tree)

    @property
    def total(self) -> int:
        return self.h2d + self.d2h

    def as_dict(self) -> dict:
        return dict(
            h2d=self.h2d,
            d2h=self.d2h,
            h2d_arrays=self.h2d_arrays,
            d2h_arrays=self.d2h_arrays,
        )


def host_ops(*programs: Any) -> list[str]:
    """The host-talking operations found in ``jax.stages.Lowered`` / ``Compiled``
    objects or HLO/StableHLO text (empty list: none)."""
    found = []
    for program in programs:
        text = program if isinstance(program, str) else program.as_text()
        found += [m.group(0).strip() for m in _HOST_OP.finditer(text)]
    return found
