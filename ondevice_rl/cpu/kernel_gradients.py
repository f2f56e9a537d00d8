"""The kernel gradient of a dense layer, ``x^T g`` (``x [M, K]`` rows in,
``g [M, N]`` the output's cotangent, ``[K, N]`` out), in the forms XLA:CPU
runs fastest; ``ondevice_rl.cpu.layers.dense_matmul`` picks one per layer when
a program is lowered for CPU (a GPU or TPU gets ``kernel_gradient``, the
plain leading-axis contraction, which XLA:CPU runs outside YNNPACK at about
half the matmul's rate).

* ``x^T`` copied behind a barrier, then a matmul (the default): DQN's
  128×120×84 kernel gradient ≈30 µs instead of ≈60 µs;
* one output unit: ``g^T x``, whose operands are reshapes (a value head:
  no ``[K, M]`` copy): 1 seed, SAC +7%, TD3 +17%; PPO at 256 seeds +8%;
* few output units in a run of one: ``(g^T x)^T``, copying the small
  ``g^T`` (a policy head): 1 seed, SAC +4-8%, DQN +3-5%; in a population
  this form measured 6-10% slower (DQN, 16 seeds), so there ``x^T g`` is
  kept;
* an input that is a cheap activation, in a population of one: the plain
  contraction (XLA:CPU would recompute the activation inside the copy):
  1 seed, SAC +3-7%, TD3 +4-14%, DQN +4-8%.

The forms that depend on the population decide under ``vmap``
(``jax.custom_batching.custom_vmap``); a ``custom_jvp`` keeps their second
derivatives.
"""

import functools

import jax
import jax.numpy as jnp


def dot(x: jax.Array, y: jax.Array, contract: tuple, precision) -> jax.Array:
    """``dot_general`` contracting the axes ``contract``, no batch axes."""
    return jax.lax.dot_general(x, y, (contract, ((), ())), precision=precision)


def _copied_x_gradient(x_rows, g_rows, precision):
    """``x^T g``, ``[..., K, N]``, with ``x^T`` materialised behind a barrier
    so XLA cannot fold the transpose back into a leading-axis contraction
    (see ``ondevice_rl.cpu.layers.dense_matmul``)."""
    x_t = jax.lax.optimization_barrier(jnp.swapaxes(x_rows, -1, -2))
    return jnp.matmul(x_t, g_rows, precision=precision)


def _differentiable(product, copied_x):
    """``product`` (a ``custom_vmap`` function of ``(x, g)``, which has no
    derivative rules) with a tangent: the product is bilinear, so its
    tangent is the same product twice, taken in the ``x^T g`` form
    ``copied_x``, which reverse mode can transpose (Hessians, gradients of
    gradients)."""

    @jax.custom_jvp
    def gradient(x, g):
        return product(x, g)

    @gradient.defjvp
    def gradient_jvp(primals, tangents):
        (x, g), (dx, dg) = primals, tangents
        return gradient(x, g), copied_x(dx, g) + copied_x(x, dg)

    return gradient


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

    gradient = _differentiable(one_run, copied_x)
    return gradient(x_rows, g_rows)


def _recomputed_input_gradient(x_rows, g_rows, precision):
    """``x^T g``, ``[K, N]``, for an input ``x`` that is a cheap elementwise
    result (a ReLU or swish of the layer before): copied ``x^T`` in a run
    outside ``vmap`` and in a population, the plain leading-axis contraction
    where a ``vmap`` of size one encloses it (a population of one: the
    activations carry a size-one axis, and XLA:CPU then recomputes the
    activation inside the transposed copy, a strided loop that costs more
    than the plain contraction loses). The decision is taken per ``vmap``
    level from the innermost out: the first level of size one, at any depth,
    picks the plain form for itself and the member axes inside it (a run's
    twin critics in a population of one); levels outside it batch that
    form."""
    copied = functools.partial(_copied_x_gradient, precision=precision)
    plain = functools.partial(kernel_gradient, precision=precision)

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
            if axis_size == 1:
                pairs = zip((x, g), in_batched, strict=True)
                x, g = (a[0] if b else a for a, b in pairs)
                return over(members, plain)(x, g)[None], True
            if not all(in_batched):  # a shared operand: no broadcast copy
                axes = tuple(0 if b else None for b in in_batched)
                return jax.vmap(over(members, copied), in_axes=axes)(x, g), True
            return at_depth(members + 1)(x, g), True

        return run

    return _differentiable(at_depth(0), copied)(x_rows, g_rows)


def kernel_gradient_cpu(x_rows, g_rows, precision, recomputed_input):
    """``x^T g`` ``[K, N]`` in XLA:CPU's fast form for the layer's shape
    (``recomputed_input``: ``x`` is a ReLU or swish, see
    ``dense_matmul``)."""
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


def kernel_gradient(x_rows, g_rows, precision):
    """``x^T g`` ``[K, N]`` as one contraction of both leading axes (what
    autodiff emits, and what GPUs and TPUs run natively)."""
    return dot(x_rows, g_rows, ((0,), (0,)), precision)
