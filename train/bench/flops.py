"""Matmul FLOPs of a traced program, and one device's measured matmul peak:
what ``bench train`` divides to say how much of the machine a run uses.

``matmul_flops`` walks a jaxpr: every ``dot_general`` costs ``2 × (output
elements) × (contracted size)`` and every convolution ``2 × (output elements)
× (kernel window × input features per group)``; a ``scan`` body counts
``length`` times, a ``cond``/``switch`` its costliest branch (the branches of
``lax.platform_dependent`` do the same arithmetic), and any other nested
program (``pjit``, custom derivatives, ``remat``) once. Gradients are already
spelled out as dots in a traced training program, so the count covers the
update's backward pass. A ``while`` loop's trip count is not static: its body
counts once and ``whiles`` says how many were seen (our learners' loops are
all ``scan``). Element-wise work is not counted: the figure is the matmul
arithmetic the hardware's peak refers to. Dead code goes first, as in the
compiled program.
"""

import math
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.interpreters import partial_eval as pe

#: Side of the square float32 matmul whose rate stands for one device's peak.
PEAK_SIZE = 1024
PEAK_REPEATS = 3


class FlopCount(NamedTuple):
    """``flops``: matmul FLOPs; ``whiles``: ``while`` loops counted once."""

    flops: int
    whiles: int


def _subprograms(params: dict) -> list:
    found = []
    for value in params.values():
        items = value if isinstance(value, tuple | list) else (value,)
        for item in items:
            inner = getattr(item, "jaxpr", item)
            if hasattr(inner, "eqns"):
                found.append(inner)
    return found


def _dot_flops(eqn) -> int:
    (contract, _), _ = eqn.params["dimension_numbers"]
    lhs = eqn.invars[0].aval.shape
    out = eqn.outvars[0].aval.shape
    return 2 * math.prod(out) * math.prod(lhs[d] for d in contract)


def _conv_flops(eqn) -> int:
    rhs = eqn.invars[1].aval.shape
    spec = eqn.params["dimension_numbers"].rhs_spec  # (out, in, *spatial)
    window = math.prod(rhs[d] for d in spec[2:]) * rhs[spec[1]]
    return 2 * math.prod(eqn.outvars[0].aval.shape) * window


def _count(jaxpr) -> FlopCount:
    flops = whiles = 0
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "dot_general":
            flops += _dot_flops(eqn)
            continue
        if name == "conv_general_dilated":
            flops += _conv_flops(eqn)
            continue
        inner = [_count(sub) for sub in _subprograms(eqn.params)]
        if not inner:
            continue
        if name == "cond":
            flops += max(c.flops for c in inner)
            whiles += max(c.whiles for c in inner)
            continue
        times = eqn.params["length"] if name == "scan" else 1
        whiles += (name == "while") + sum(c.whiles for c in inner)
        flops += times * sum(c.flops for c in inner)
    return FlopCount(flops, whiles)


def live_jaxpr(fn, *args: Any) -> Any:
    """The jaxpr of one call ``fn(*args)`` (traced, never run) after dead
    code is removed as XLA removes it (a custom gradient computes every
    input's cotangent; the ones nobody reads are never run)."""
    return live(jax.make_jaxpr(fn)(*args).jaxpr)


def live(jaxpr: Any) -> Any:
    """``jaxpr`` with the code that no output reads removed."""
    return pe.dce_jaxpr(jaxpr, [True] * len(jaxpr.outvars))[0]


def matmul_flops(fn, *args: Any) -> FlopCount:
    """The matmul FLOPs of one call ``fn(*args)``, dead code removed
    (``live_jaxpr``)."""
    return _count(live_jaxpr(fn, *args))


def traced_flops(traced: Any) -> FlopCount:
    """``matmul_flops`` of a ``jax.jit(fn).trace(*args)``: the program a
    bench compiles, counted from the same trace rather than a second one."""
    return _count(live(traced.jaxpr.jaxpr))


def matmul_peak(size: int = PEAK_SIZE, repeats: int = PEAK_REPEATS) -> float:
    """One device's float32 matmul rate in FLOP/s: the best of ``repeats``
    timings of 8 chained ``[size, size]`` matmuls in one program."""

    def chain(a, b):
        def body(x, _):
            return jnp.tanh(x @ b), None

        return jax.lax.scan(body, a, None, length=8)[0]

    key_a, key_b = jax.random.split(jax.random.PRNGKey(0))
    a = jax.random.normal(key_a, (size, size)) / math.sqrt(size)
    b = jax.random.normal(key_b, (size, size)) / math.sqrt(size)
    run = jax.jit(chain).lower(a, b).compile()
    jax.block_until_ready(run(a, b))
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(run(a, b))
        best = min(best, time.perf_counter() - t0)
    return 8 * 2 * size**3 / best
