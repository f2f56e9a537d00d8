"""Layers whose program is chosen per platform when it is lowered.

On CPU: orthogonal initialisation one member at a time under ``vmap``
(``sequential_under_vmap``: a batched QR can deadlock XLA:CPU), a dense
layer's kernel gradient laid out for XLA:CPU's fast matmul
(``dense_matmul``), a 3×3 convolution as one im2col matmul (``Conv3x3``).
On GPU and TPU each is the plain form (``jax.lax.platform_dependent``), so
a program exported for an accelerator from a CPU-only machine is the plain
one. Shapes: ``[..., K]`` rows, ``[..., H, W, C]`` images.
"""

import functools
from collections.abc import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np


def sequential_under_vmap(init: Callable) -> Callable:
    """A flax initializer that, under ``vmap``, runs once per member in a loop
    on CPU, and batched elsewhere.

    Orthogonal initialisation is a LAPACK QR on XLA:CPU. Batched (as ``vmap``
    over seeds makes it), the QR kernel splits its batch over the intra-op
    thread pool and blocks the calling pool thread until the pieces finish;
    when every pool thread is inside such a kernel (two CPU devices running
    at once, or several executions queued), nothing is left to run the pieces
    and the process deadlocks. One unbatched QR per member (``lax.map``)
    never waits on the pool, and gives the same numbers. A GPU or TPU runs
    the batched QR as it is; the choice is made when the program is lowered
    for a platform (``jax.lax.platform_dependent``).
    """

    def member_init(key, shape, dtype=jnp.float32):
        def plain(key):
            return init(key, shape, dtype)

        @jax.custom_batching.custom_vmap
        def one(key):
            return plain(key)

        @one.def_vmap
        def one_per_member(axis_size, in_batched, key):
            del axis_size, in_batched
            keys = jax.lax.platform_dependent(
                key,
                cpu=lambda keys: jax.lax.map(one, keys),
                default=jax.vmap(plain),
            )
            return keys, True

        return one(key)

    return member_init


def _dot(x: jax.Array, y: jax.Array, contract: tuple, precision) -> jax.Array:
    return jax.lax.dot_general(x, y, (contract, ((), ())), precision=precision)


def _copied_x_gradient(x_rows, g_rows, precision):
    """``x^T g``, ``[..., K, N]``, with ``x^T`` materialised behind a barrier
    so XLA cannot fold the transpose back into a leading-axis contraction
    (see ``dense_matmul``)."""
    x_t = jax.lax.optimization_barrier(jnp.swapaxes(x_rows, -1, -2))
    return jnp.matmul(x_t, g_rows, precision=precision)


def _few_units_gradient(x_rows, g_rows, precision):
    """``(g^T x)^T``, ``[K, N]``: moves ``N (M + K)`` elements, not ``x^T``'s
    ``M K``. In a population (``vmap``, more than one member) the batched
    form measured slower (DQN, 16 seeds: 6-10%: ``g^T`` waits for the loss,
    where ``x^T`` is copied by another thread during the backward pass), so
    there ``x^T g`` is kept, the program plain ``vmap`` made of it; a
    population of one is one run."""

    copied_x = functools.partial(_copied_x_gradient, precision=precision)

    @jax.custom_batching.custom_vmap
    def one_run(x, g):
        # Both transposes behind barriers, or XLA folds them back into the
        # leading-axis contraction.
        barrier = jax.lax.optimization_barrier
        return barrier(jnp.matmul(barrier(g.T), x, precision=precision)).T

    @one_run.def_vmap
    def population(axis_size, in_batched, x, g):
        if axis_size == 1:
            x, g = (a[0] if b else a for a, b in zip((x, g), in_batched, strict=True))
            return gradient(x, g)[None], True
        axes = tuple(0 if b else None for b in in_batched)
        return jax.vmap(copied_x, in_axes=axes)(x, g), True

    # custom_vmap has no derivative rules. The product is bilinear: its
    # tangent is the same product twice, taken in the x^T g form, which
    # reverse mode can transpose (Hessians, gradients of gradients).
    @jax.custom_jvp
    def gradient(x, g):
        return one_run(x, g)

    @gradient.defjvp
    def gradient_jvp(primals, tangents):
        (x, g), (dx, dg) = primals, tangents
        return gradient(x, g), copied_x(dx, g) + copied_x(x, dg)

    return gradient(x_rows, g_rows)


def _recomputed_input_gradient(x_rows, g_rows, precision):
    """``x^T g``, ``[K, N]``, for an input ``x`` that is a cheap elementwise
    result (a ReLU or swish of the layer before): copied ``x^T`` in a run
    outside ``vmap`` and in a population, the plain leading-axis contraction
    where a ``vmap`` of size one encloses it (a population of one: the
    activations carry a size-one axis, and XLA:CPU then recomputes the
    activation inside the transposed copy, strided, which cost more than
    the slower contraction saves). The decision is taken per ``vmap`` level
    from the innermost out: the first level of size one, at any depth,
    picks the plain form for itself and the member axes inside it (a run's
    twin critics in a population of one); levels outside it batch that
    form."""
    copied = functools.partial(_copied_x_gradient, precision=precision)
    plain = functools.partial(_kernel_gradient, precision=precision)

    def over(members: int, gradient):
        for _ in range(members):
            gradient = jax.vmap(gradient)
        return gradient

    def at_depth(members: int):
        """The gradient of ``[*P, M, K]``, ``[*P, M, N]`` with ``members``
        leading member axes ``P``."""

        @jax.custom_batching.custom_vmap
        def run(x, g):
            return over(members, copied)(x, g)

        @run.def_vmap
        def level(axis_size, in_batched, x, g):
            if not all(in_batched):  # a shared operand: no broadcast copy
                axes = tuple(0 if b else None for b in in_batched)
                return jax.vmap(over(members, copied), in_axes=axes)(x, g), True
            if axis_size == 1:
                return over(members, plain)(x[0], g[0])[None], True
            return at_depth(members + 1)(x, g), True

        return run

    # custom_vmap has no derivative rules; the product is bilinear (see
    # _few_units_gradient).
    @jax.custom_jvp
    def gradient(x, g):
        return at_depth(0)(x, g)

    @gradient.defjvp
    def gradient_jvp(primals, tangents):
        (x, g), (dx, dg) = primals, tangents
        return gradient(x, g), copied(dx, g) + copied(x, dg)

    return gradient(x_rows, g_rows)


def _kernel_gradient_cpu(x_rows, g_rows, precision, recomputed_input):
    (rows, k), n = x_rows.shape, g_rows.shape[-1]
    if n == 1:
        # One output unit: g^T x is [1, M] x [M, K], and both g^T and the
        # [K, 1] result are reshapes of what exists, not copies.
        g_row = g_rows.reshape(1, rows)
        return jnp.matmul(g_row, x_rows, precision=precision).reshape(k, n)
    if n * (rows + k) < rows * k:
        return _few_units_gradient(x_rows, g_rows, precision)
    if recomputed_input:
        return _recomputed_input_gradient(x_rows, g_rows, precision)
    return _copied_x_gradient(x_rows, g_rows, precision)


def _kernel_gradient(x_rows, g_rows, precision):
    return _dot(x_rows, g_rows, ((0,), (0,)), precision)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def dense_matmul(
    x: jax.Array, kernel: jax.Array, precision=None, recomputed_input: bool = False
) -> jax.Array:
    """``x [..., K] @ kernel [K, N] -> [..., N]``, with a gradient laid out
    for XLA:CPU's fast matmul when lowered for CPU.

    The same numbers as ``x @ kernel`` and its autodiff gradient, up to
    summation order; ``precision`` (a ``jax.lax.Precision``, its name, or
    None: the ``jax.default_matmul_precision`` in force) applies to the
    forward matmul and to both gradient matmuls. Autodiff gives the kernel's
    gradient as ``g^T x`` (``[N, K]``) transposed, which XLA:CPU folds into
    one dot contracting both operands' leading axis; that form misses
    YNNPACK and ran ≈2× slower than the matmul it mirrors (DQN's 128×120×84
    middle layer: ≈60 µs vs ≈30 µs). On CPU the kernel's gradient is
    therefore ``x^T g`` with ``x^T`` materialised (an optimisation barrier
    stops XLA folding the transpose back), except for a layer with one
    output unit (a value head), whose gradient is ``g^T x`` with no copy:
    ``g^T`` is then a reshape, where ``x^T`` would be a ``[K, M]`` copy
    that XLA fuses with the activation before it; a layer with few output
    units (``N (M + K) < M K``: a policy head) outside a population also
    takes ``g^T x``, copying the small ``g^T``; ``recomputed_input`` says
    ``x`` is a cheap elementwise result that XLA:CPU recomputes inside the
    copy of ``x^T`` under a ``vmap`` of size one (a ReLU or swish), where
    the plain contraction is faster (``_recomputed_input_gradient``); on GPU
    and TPU, whose matmuls
    take transposed operands natively and where a barrier would only block
    fusion, it is the plain leading-axis contraction. The choice is made
    when the program is lowered for a platform (``platform_dependent``), so
    a program exported for a GPU from a CPU-only machine has the GPU form.
    ``g kernel^T`` contracts the kernel's last axis, which YNNPACK takes as
    it is.
    """
    return jnp.matmul(x, kernel, precision=precision)


def _dense_matmul_fwd(x, kernel, precision, recomputed_input):
    del recomputed_input
    return jnp.matmul(x, kernel, precision=precision), (x, kernel)


def _dense_matmul_bwd(precision, recomputed_input, saved, g):
    x, kernel = saved
    dx = _dot(g, kernel, ((g.ndim - 1,), (1,)), precision)
    x_rows = x.reshape(-1, x.shape[-1])  # [M, K]
    g_rows = g.reshape(-1, g.shape[-1])  # [M, N]
    dkernel = jax.lax.platform_dependent(
        x_rows,
        g_rows,
        cpu=functools.partial(
            _kernel_gradient_cpu,
            precision=precision,
            recomputed_input=recomputed_input,
        ),
        default=functools.partial(_kernel_gradient, precision=precision),
    )
    return dx, dkernel


dense_matmul.defvjp(_dense_matmul_fwd, _dense_matmul_bwd)


def _dense_dot_general(
    lhs, rhs, dimension_numbers, precision=None, recomputed_input=False, **_
):
    """``nn.Dense``'s ``dot_general`` hook: its one contraction (``lhs``'s
    last axis with ``rhs``'s first) as ``dense_matmul``, at the layer's
    ``precision`` (None, as our layers leave it: the default in force)."""
    contract, batch = dimension_numbers
    if contract != ((lhs.ndim - 1,), (0,)) or batch != ((), ()):
        raise ValueError(f"dense_matmul takes a Dense contraction, got {contract}")
    return dense_matmul(lhs, rhs, precision, recomputed_input)


_RECOMPUTED_INPUT_DOT = functools.partial(_dense_dot_general, recomputed_input=True)


def dense(features: int, scale: float, recomputed_input: bool = False) -> nn.Dense:
    """An ``nn.Dense`` with zero biases, an orthogonal kernel of gain ``scale``
    (one member at a time on CPU) and ``dense_matmul`` as its matmul;
    ``recomputed_input``: the input is a cheap activation (see
    ``dense_matmul``)."""
    return nn.Dense(
        features,
        kernel_init=sequential_under_vmap(nn.initializers.orthogonal(scale)),
        bias_init=nn.zeros,
        dot_general=_RECOMPUTED_INPUT_DOT if recomputed_input else _dense_dot_general,
    )


def _conv3x3_im2col(x: jax.Array, kernel: jax.Array) -> jax.Array:
    """``[..., H, W, C]`` with a ``[3, 3, C, F]`` kernel as one matmul over
    the 9 shifted views of the input (XLA:CPU's fast form)."""
    h, w, channels = x.shape[-3] - 2, x.shape[-2] - 2, x.shape[-1]
    views = [x[..., i : i + h, j : j + w, :] for i in range(3) for j in range(3)]
    patches = jnp.concatenate(views, axis=-1)  # [..., h, w, 9 * C], (i, j, c)
    return dense_matmul(patches, kernel.reshape(9 * channels, kernel.shape[-1]))


def _conv3x3_native(x: jax.Array, kernel: jax.Array) -> jax.Array:
    """The same as one ``stablehlo.convolution`` (what GPUs and TPUs run
    natively): the leading axes folded into one batch axis and back."""
    batch = x.shape[:-3]
    images = x.reshape((-1, *x.shape[-3:]))
    out = jax.lax.conv_general_dilated(
        images, kernel, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )
    return out.reshape((*batch, *out.shape[1:]))


class Conv3x3(nn.Module):
    """A 3×3 convolution, stride 1, VALID padding: ``[..., H, W, C] ->
    [..., H-2, W-2, features]``.

    The numbers are ``nn.Conv``'s (same ``[3, 3, C, F]`` kernel, same init).
    Lowered for CPU it is one matmul over the 9 shifted views of the input
    (im2col): inside ``lax.scan`` — where every learner's update runs —
    XLA:CPU's convolution and its gradients ran ≈7× slower than this matmul
    (measured: 8 gradient steps on 1024 MinAtar frames, 1.05 s vs 0.14 s;
    the same outside a loop). Lowered for any other platform it is the
    native convolution. Orthogonal kernels go through
    ``sequential_under_vmap`` like ``dense``: a batched QR would risk the
    XLA:CPU deadlock.
    """

    features: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        channels = x.shape[-1]
        init = sequential_under_vmap(nn.initializers.orthogonal(np.sqrt(2)))
        kernel = self.param("kernel", init, (3, 3, channels, self.features))
        bias = self.param("bias", nn.zeros, (self.features,))
        out = jax.lax.platform_dependent(
            x, kernel, cpu=_conv3x3_im2col, default=_conv3x3_native
        )
        return out + bias
