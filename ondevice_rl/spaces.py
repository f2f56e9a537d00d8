"""Action and observation spaces that can be sampled inside jitted code."""

from dataclasses import dataclass

import jax
import jax.numpy as jnp


@dataclass(frozen=True)
class Discrete:
    """Integers ``0 .. n-1``."""

    n: int
    dtype: jnp.dtype = jnp.int32

    @property
    def shape(self) -> tuple[int, ...]:
        return ()

    def sample(self, key: jax.Array) -> jax.Array:
        return jax.random.randint(key, (), 0, self.n, dtype=self.dtype)

    def contains(self, x: jax.Array) -> jax.Array:
        return jnp.logical_and(x >= 0, x < self.n)


@dataclass(frozen=True)
class Box:
    """A box ``[low, high]`` of the given shape; bounds are scalars or arrays."""

    low: object
    high: object
    shape: tuple[int, ...]
    dtype: jnp.dtype = jnp.float32

    def sample(self, key: jax.Array) -> jax.Array:
        low = jnp.broadcast_to(jnp.asarray(self.low, self.dtype), self.shape)
        high = jnp.broadcast_to(jnp.asarray(self.high, self.dtype), self.shape)
        # Unbounded dimensions are sampled from a unit normal, like gymnasium.
        finite = jnp.isfinite(low) & jnp.isfinite(high)
        u = jax.random.uniform(key, self.shape, self.dtype)
        n = jax.random.normal(key, self.shape, self.dtype)
        return jnp.where(finite, low + u * (high - low), n)

    def contains(self, x: jax.Array) -> jax.Array:
        return jnp.all((x >= self.low) & (x <= self.high))
