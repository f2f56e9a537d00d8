"""A random permutation of ``arange(n)`` (an epoch's minibatch order) in the
form each platform runs best, chosen when the program is lowered
(``lax.platform_dependent``).

``jax.random.permutation`` sorts (key, index) pairs; on XLA:CPU that sort
costs ≈5× more than sorting one uint32 array, so on CPU the index rides in
the low bits of one random sort key (``one_key_permutation``: 5× cheaper
shuffles, part of the 1-seed PPO gains listed in ``docs/performance.md``).
Ties in the remaining high bits (≥ 20 bits for ``n`` ≤ 4096) keep index
order, a bias far below minibatch noise. A GPU or TPU program gets
``jax.random.permutation`` itself.
"""

import jax
import jax.numpy as jnp


def permutation(key: jax.Array, n: int) -> jax.Array:
    """A random permutation of ``arange(n)``, ``[n]`` int32: one sort key per
    element on CPU, ``jax.random.permutation`` elsewhere."""
    return jax.lax.platform_dependent(
        key,
        cpu=lambda key: _varying_as(key, one_key_permutation(key, n)),
        default=lambda key: _varying_as(
            key, jax.random.permutation(key, n).astype(jnp.int32)
        ),
    )


def _varying_as(key: jax.Array, x: jax.Array) -> jax.Array:
    """``x`` varying over every manual mesh axis ``key`` varies over (inside
    ``shard_map``), so both branches have one type: ``jax.random.permutation``
    drops the key's varying axes."""
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    missing = tuple(_vma(key) - _vma(x))
    return jax.lax.pcast(x, missing, to="varying") if missing else x


def one_key_permutation(key: jax.Array, n: int) -> jax.Array:
    """A random permutation of ``arange(n)`` from one single-operand sort,
    ``[n]`` int32: random high bits above the index's low bits."""
    index_bits = max(1, (n - 1).bit_length())
    bits = jax.random.bits(key, (n,), jnp.uint32)
    high = jnp.uint32((0xFFFFFFFF << index_bits) & 0xFFFFFFFF)
    keys = (bits & high) | jnp.arange(n, dtype=jnp.uint32)
    low = jnp.uint32((1 << index_bits) - 1)
    return (jnp.sort(keys) & low).astype(jnp.int32)


def _vma(x: jax.Array) -> frozenset:
    """The manual mesh axes ``x`` varies over (empty outside ``shard_map``)."""
    return jax.typeof(x).manual_axis_type.varying
