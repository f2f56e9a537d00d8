"""Peak device bytes of a traced program, read from its jaxpr: nothing compiled.

``peak_bytes(closed_jaxpr)`` walks the program in order and keeps a running
total of the arrays alive (each freed after its last use), recursing into
loop bodies and branches, and takes the largest total it meets: the arrays
XLA's buffer assignment would have to hold at once. Three things XLA does
are modelled, since without them the count is several times too high:

* calls (nested ``jit``, custom derivatives, custom batching rules) are
  inlined, as XLA inlines them;
* loop fusion: an elementwise result used only by elementwise operations and
  reductions is computed inside its consumers, never stored; the arrays it
  is computed from stay alive until those consumers have run;
* in-place updates: ``dynamic_update_slice`` and scatters write into their
  operand, and loops hand their carries back in the buffers they came in,
  when that operand is not used afterwards (a replay buffer is held once,
  not once per update). A branch's results are new buffers.

Arrays are counted at their own sizes rounded up to XLA's buffer alignment
(PRNG keys as two 32-bit words).
"""

import math
from collections import defaultdict
from typing import Any, NamedTuple

import jax
import numpy as np
from jax.extend import core

#: Operations XLA fuses into one loop with their elementwise neighbours.
ELEMENTWISE = frozenset(
    """abs acos acosh add add_any and asin asinh atan atan2 atanh
    bitcast_convert_type broadcast_in_dim cbrt ceil clamp concatenate
    convert_element_type copy copy_p cos cosh div dynamic_slice eq erf
    erf_inv erfc exp exp2 expand_dims expm1 floor gather ge gt imag integer_pow
    iota is_finite le lgamma log log1p logistic lt max min mul ne neg nextafter
    not or pad population_count pow real reduce_precision rem reshape rev
    round rsqrt select_n shift_left shift_right_arithmetic
    shift_right_logical sign sin sinh slice sqrt square squeeze stop_gradient
    sub tan tanh threefry2x32 transpose xor random_bits random_wrap
    random_unwrap random_seed random_fold_in random_split split""".split()
)
#: Consumers that read fused elementwise inputs without storing them.
REDUCTIONS = frozenset(
    """reduce_sum reduce_max reduce_min reduce_prod reduce_and reduce_or
    argmax argmin""".split()
)
FUSIBLE = ELEMENTWISE | REDUCTIONS
#: Operations that write their result into their first operand's buffer.
IN_PLACE = frozenset(
    "dynamic_update_slice scatter scatter-add scatter_add scatter_mul "
    "scatter_min scatter_max".split()
)
#: Operations whose one sub-program XLA inlines.
CALLS = frozenset(
    "jit pjit closed_call core_call remat checkpoint custom_jvp_call "
    "custom_vjp_call custom_vmap_call custom_lin".split()
)
#: XLA aligns every buffer; a scalar takes this many bytes.
ALIGNMENT = 64


def array_bytes(aval: Any) -> int:
    """Bytes of one array of abstract value ``aval`` (0 for tokens), rounded
    up to ``ALIGNMENT``."""
    shape, dtype = getattr(aval, "shape", None), getattr(aval, "dtype", None)
    if shape is None or dtype is None:
        return 0
    if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        itemsize = 8  # two uint32 words for the default Threefry keys
    else:
        itemsize = np.dtype(dtype).itemsize
    return -(-math.prod(shape) * itemsize // ALIGNMENT) * ALIGNMENT


class _Op(NamedTuple):
    """One operation of a flattened program; values are integer ids (None
    for literals and constants)."""

    name: str
    ins: list
    outs: list
    params: dict
    subs: list  # sub-programs (loop bodies, branches), analysed on their own


class _Flat:
    def __init__(self) -> None:
        self.ops: list[_Op] = []
        self.size: dict[int, int] = {}

    def fresh(self, aval: Any) -> int:
        i = len(self.size)
        self.size[i] = array_bytes(aval)
        return i


def _subprograms(params: dict) -> list:
    return [
        j.jaxpr if hasattr(j, "jaxpr") else j for j in core.jaxprs_in_params(params)
    ]


def _platform_branch(params: dict) -> int:
    """The branch ``lax.platform_dependent`` keeps when the program is
    lowered for the default backend (the others are never compiled)."""
    backend = jax.default_backend()
    names = {"gpu": ("cuda", "rocm")}.get(backend, (backend,))
    choices = params["branches_platforms"]
    for i, platforms in enumerate(choices):
        if platforms is not None and any(n in platforms for n in names):
            return i
    return choices.index(None)


def _flatten(jaxpr: Any, env: dict, flat: _Flat) -> None:
    """Appends ``jaxpr``'s operations to ``flat`` with calls inlined; ``env``
    maps its variables to value ids."""
    for eqn in jaxpr.eqns:
        ins = [env.get(v) if isinstance(v, core.Var) else None for v in eqn.invars]
        subs = _subprograms(eqn.params)
        by_platform = eqn.params.get("branches_platforms") is not None
        if by_platform:  # lax.platform_dependent: one branch is compiled
            subs, ins = [subs[_platform_branch(eqn.params)]], ins[1:]
        if (by_platform or eqn.primitive.name in CALLS) and len(subs) == 1:
            body = subs[0]
            inner = dict(zip(body.invars, ins, strict=True))
            _flatten(body, inner, flat)
            for out, value in zip(eqn.outvars, body.outvars, strict=True):
                env[out] = inner.get(value) if isinstance(value, core.Var) else None
            continue
        outs = [flat.fresh(v.aval) for v in eqn.outvars]
        env.update(zip(eqn.outvars, outs, strict=True))
        flat.ops.append(_Op(eqn.primitive.name, ins, outs, eqn.params, subs))


def _scan_counts(params: dict, operands: int) -> tuple[int, int]:
    """A scan's (consts, carries): JAX up to 0.10 names the counts; later
    versions pack its operands' groups in a flat tree (``ft_in``)."""
    if "num_consts" in params:
        return params["num_consts"], params["num_carry"]
    consts, carries, _ = params["ft_in"].update(list(range(operands))).unpack()
    return len(consts), len(carries)


def _reused_operands(op: _Op, dying) -> dict[int, int]:
    """``{output index: operand index}`` of outputs written into an operand's
    buffer (the operand not used afterwards)."""
    if op.name in IN_PLACE:
        return {0: 0} if dying(op.ins[0]) else {}
    if op.name == "scan":
        consts, carries = _scan_counts(op.params, len(op.ins))
        pairs = ((k, consts + k) for k in range(carries))
    elif op.name == "while":
        consts = op.params["cond_nconsts"] + op.params["body_nconsts"]
        pairs = ((k, consts + k) for k in range(len(op.outs)))
    else:
        return {}
    return {k: j for k, j in pairs if dying(op.ins[j])}


def _peak(jaxpr: Any, owns_inputs: bool) -> int:
    """Peak bytes of ``jaxpr``'s values, its inputs not counted (a loop
    body's inputs are its loop's buffers); ``owns_inputs``: they may be
    updated in place (loop carries) and are freed after their last use."""
    flat = _Flat()
    env = {v: flat.fresh(v.aval) for v in jaxpr.invars}
    inputs = set(env.values())
    _flatten(jaxpr, env, flat)
    ops, size = flat.ops, flat.size
    results = [env.get(v) for v in jaxpr.outvars if isinstance(v, core.Var)]
    consumers = defaultdict(list)
    for op in ops:
        for x in op.ins:
            if x is not None:
                consumers[x].append(op.name)
    kept = set(results)
    virtual = {
        x
        for op in ops
        if op.name in ELEMENTWISE
        for x in op.outs
        if x not in kept and consumers[x] and all(c in FUSIBLE for c in consumers[x])
    }
    sources: dict[int, frozenset] = {}
    for op in ops:
        for x in op.outs:
            if x in virtual:
                parts = (sources.get(y, (y,)) for y in op.ins if y is not None)
                sources[x] = frozenset().union(*parts)

    def stored(x):
        return sources[x] if x in virtual else (x,)

    last = {}
    for i, op in enumerate(ops):
        for y in op.ins:
            if y is not None:
                for m in stored(y):
                    last[m] = i
    for y in results:
        if y is not None:
            for m in stored(y):
                last[m] = len(ops)
    held = set() if owns_inputs else inputs
    live = peak = 0
    freed: set[int] = set()
    for i, op in enumerate(ops):

        def dying(x, i=i):
            return (
                x is not None
                and x not in virtual
                and x not in held
                and (last.get(x) == i)
            )

        reused = _reused_operands(op, dying)
        inner = max((_peak(sub, True) for sub in op.subs), default=0)
        new = [
            0 if (x in virtual or k in reused) else size[x]
            for k, x in enumerate(op.outs)
        ]
        peak = max(peak, live + sum(new) + inner)
        live += sum(new)
        taken = set(reused.values())
        for j, y in enumerate(op.ins):
            if y is None or j in taken:
                continue
            for m in stored(y):
                if m not in freed and m not in held and last.get(m) == i:
                    live -= size[m]
                    freed.add(m)
        for k, x in enumerate(op.outs):
            if new[k] and x not in last:
                live -= new[k]  # never read
                freed.add(x)
    return peak


def peak_bytes(closed_jaxpr: Any) -> int:
    """Peak device bytes of running ``closed_jaxpr``: its arguments, then
    the most its values take at once (outputs included)."""
    jaxpr = closed_jaxpr.jaxpr
    arguments = sum(array_bytes(v.aval) for v in jaxpr.invars)
    return arguments + _peak(jaxpr, owns_inputs=False)
