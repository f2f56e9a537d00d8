"""``lax.scan`` in the form each platform runs best, chosen when the
program is lowered (``lax.platform_dependent``); XLA:CPU keeps the plain
scan, so its program is what it would be without this module.

* ``stacked_scan``: a scan stacks each output leaf of a step through a
  dynamic-update-slice of its own. On a GPU a step of a dozen small leaves
  (a rollout's transition, an update's metrics) then breaks its CUDA graph
  into loose launches: a CartPole PPO step was 12 launches, one CUDA graph
  and 11 kernels and memcpys launched alone (``ondevice-rl bench
  launches``). Off CPU the step's leaves are packed into one array per
  dtype before they are stacked and split after the scan: one CUDA graph.
* ``unrolled_off_cpu``: a scan of small steps (returns, a recurrence)
  unrolled off CPU, where each iteration costs launches of its own.
* ``traced_once``: a function traced once, so the platforms' forms replay
  one jaxpr instead of tracing the Python twice (every scan nested inside
  would double again).
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


def stacked_scan(
    step: Callable[[Any], tuple[Any, Any]], init: Any, length: int
) -> tuple[Any, Any]:
    """``jax.lax.scan(lambda c, _: step(c), init, None, length)``: the final
    carry and the step's outputs stacked ``[length, ...]``; off CPU as
    ``packed_scan``."""
    once = traced_once(step, init)
    return jax.lax.platform_dependent(
        cpu=lambda: jax.lax.scan(lambda c, _: once(c), init, None, length=length),
        default=lambda: packed_scan(once, init, length),
    )


def unrolled_off_cpu(
    body: Callable[[Any, Any], tuple[Any, Any]],
    init: Any,
    xs: Any,
    unroll: int,
    reverse: bool = False,
) -> tuple[Any, Any]:
    """``jax.lax.scan(body, init, xs, reverse=reverse)``, unrolled by
    ``unroll`` off CPU (on a GPU each iteration is a CUDA graph and loose
    launches; the gradient's reverse scan keeps the unroll)."""
    example = jax.tree.map(lambda x: x[0], xs)
    once = traced_once(body, init, example)

    def scan(n: int):
        return lambda: jax.lax.scan(once, init, xs, reverse=reverse, unroll=n)

    return jax.lax.platform_dependent(cpu=scan(1), default=scan(unroll))


def traced_once(fn: Callable, *example: Any) -> Callable:
    """``fn`` (called as ``fn(*example)``) traced once into a jaxpr, which
    the returned function replays: its closed-over values become inputs
    (``jax.closure_convert``)."""
    traced, consts = jax.closure_convert(fn, *example)
    return lambda *args: traced(*args, *consts)


def packed_scan(
    step: Callable[[Any], tuple[Any, Any]], init: Any, length: int
) -> tuple[Any, Any]:
    """``stacked_scan`` with the step's outputs packed into one array per
    dtype inside the scan and split after it (the same values)."""
    layouts = []  # the step's output layout, known once the scan traced it

    def packed_step(carry, _):
        carry, out = step(carry)
        layouts.append(_Layout.of(out))
        return carry, layouts[-1].pack(out)

    end, stacked = jax.lax.scan(packed_step, init, None, length=length)
    return end, layouts[-1].unpack(stacked, length)


class _Layout(NamedTuple):
    """A step's outputs flattened into one ``[K]`` array per dtype (and, in
    ``shard_map``, per set of mesh axes they vary over). Leaves of extended
    dtypes (typed PRNG keys) are stacked as they are."""

    treedef: Any
    shapes: tuple
    groups: tuple  # per leaf: its (dtype, varying axes), or None (alone)
    order: tuple  # the groups, in packing order

    @staticmethod
    def of(tree) -> "_Layout":
        leaves, treedef = jax.tree.flatten(tree)

        def group(x):
            if jax.dtypes.issubdtype(x.dtype, jax.dtypes.extended):
                return None
            # Inside shard_map, leaves that vary over a mesh axis and leaves
            # that do not are packed apart, so each keeps its type.
            aval = jax.typeof(x)
            varying = getattr(aval, "manual_axis_type", None)  # jax 0.10
            varying = getattr(aval, "vma", varying)  # jax 0.6 to 0.9
            return jnp.dtype(x.dtype), str(varying)

        groups = tuple(group(x) for x in leaves)
        order = tuple(g for g in dict.fromkeys(groups) if g is not None)
        return _Layout(treedef, tuple(jnp.shape(x) for x in leaves), groups, order)

    def pack(self, tree) -> tuple[tuple, tuple]:
        """``(packed, loose)``: one ``[K]`` array per dtype, and the leaves
        stacked alone."""
        pairs = list(zip(jax.tree.leaves(tree), self.groups, strict=True))
        packed = tuple(
            jnp.concatenate([jnp.ravel(x) for x, g in pairs if g == group])
            for group in self.order
        )
        return packed, tuple(x for x, g in pairs if g is None)

    def unpack(self, stacked: tuple[tuple, tuple], length: int) -> Any:
        """The tree of ``[length, ...]`` leaves from ``pack``'s stacked
        output (``[length, K]`` arrays)."""
        packed, loose = stacked
        by_group = dict(zip(self.order, packed, strict=True))
        offsets = dict.fromkeys(self.order, 0)
        loose = iter(loose)
        leaves = []
        for shape, g in zip(self.shapes, self.groups, strict=True):
            if g is None:
                leaves.append(next(loose))
                continue
            size = int(np.prod(shape, dtype=int))
            start, offsets[g] = offsets[g], offsets[g] + size
            leaves.append(
                by_group[g][:, start : start + size].reshape((length, *shape))
            )
        return jax.tree.unflatten(self.treedef, leaves)
