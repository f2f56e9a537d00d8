"""Layers whose program is chosen per platform when it is lowered.

On CPU, each measured against the plain form:

* ``sequential_under_vmap``: orthogonal initialisation one member at a time
  under ``vmap``. A batched LAPACK QR waits on XLA:CPU's thread pool while
  holding one of its threads, and deadlocked a vmapped PPO program within
  1-3 runs with the concurrency-optimised scheduler; one QR per member ran
  it 15 times of 15, with the same numbers.
* ``dense_matmul``: a dense layer's kernel gradient laid out for XLA:CPU's
  fast matmul (``ondevice_rl.cpu.kernel_gradients``): DQN's 128×120×84
  kernel gradient took ≈60 µs in autodiff's form against ≈30 µs for the
  forward matmul; 1-seed runs back to back: PPO +10%, PQN +10%, DQN +6%.
* ``Conv3x3``: a 3×3 convolution as one im2col matmul: 8 gradient steps on
  1024 MinAtar frames inside ``lax.scan``, 0.14 s against 1.05 s for
  XLA:CPU's convolution.

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

from ondevice_rl.cpu.kernel_gradients import dot, kernel_gradient, kernel_gradient_cpu


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
    the plain contraction is faster (``kernel_gradients``); on GPU and TPU,
    whose matmuls take transposed operands natively and where a barrier
    would only block fusion, it is the plain leading-axis contraction. The
    choice is made when the program is lowered for a platform
    (``platform_dependent``), so a program exported for a GPU from a
    CPU-only machine has the GPU form.
    ``g kernel^T`` contracts the kernel's last axis, which YNNPACK takes as
    it is.
    """
    return jnp.matmul(x, kernel, precision=precision)


def _dense_matmul_fwd(x, kernel, precision, recomputed_input):
    del recomputed_input
    return jnp.matmul(x, kernel, precision=precision), (x, kernel)


def _dense_matmul_bwd(precision, recomputed_input, saved, g):
    x, kernel = saved
    dx = dot(g, kernel, ((g.ndim - 1,), (1,)), precision)
    x_rows = x.reshape(-1, x.shape[-1])  # [M, K]
    g_rows = g.reshape(-1, g.shape[-1])  # [M, N]
    dkernel = jax.lax.platform_dependent(
        x_rows,
        g_rows,
        cpu=functools.partial(
            kernel_gradient_cpu,
            precision=precision,
            recomputed_input=recomputed_input,
        ),
        default=functools.partial(kernel_gradient, precision=precision),
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
#: Activations cheap enough that XLA:CPU recomputes them where their output
#: is read again (inside the kernel gradient's copy of ``x^T``, see
#: ``dense_matmul``'s ``recomputed_input``); tanh and GELU are computed once.
RECOMPUTED_ACTIVATIONS = frozenset({"relu", "swish"})


def dense(features: int, scale: float, input_activation: str | None = None) -> nn.Dense:
    """An ``nn.Dense`` with zero biases, an orthogonal kernel of gain ``scale``
    (one member at a time on CPU) and ``dense_matmul`` as its matmul.

    ``input_activation`` names the activation (``"relu"``, ``"tanh"``, ...)
    whose output, taken straight from the matmul before it, is this layer's
    input; None for anything else (observations, an activation after a
    LayerNorm). On CPU a cheap one (``RECOMPUTED_ACTIVATIONS``) picks the
    kernel gradient's ``recomputed_input`` form.
    """
    recomputed = input_activation in RECOMPUTED_ACTIVATIONS
    return nn.Dense(
        features,
        kernel_init=sequential_under_vmap(nn.initializers.orthogonal(scale)),
        bias_init=nn.zeros,
        dot_general=_RECOMPUTED_INPUT_DOT if recomputed else _dense_dot_general,
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
