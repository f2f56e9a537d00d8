"""Action and observation spaces that can be sampled inside jitted code.

An observation space is one space or a pytree of them (a dict, tuple or
NamedTuple with a ``Box`` or ``Discrete`` at each leaf) shaped like the
observation. A leaf keeps its dtype: float32, an integer dtype (uint8 pixels,
indices) or bool; learners store it as it is and cast it at the network.
"""

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np


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
    """A box ``[low, high]`` of the given shape; bounds are scalars or arrays.

    ``categorical=True`` (integer dtypes, ``low`` 0) says each entry is an
    index, not an intensity: a grid of object, colour or state ids.
    ``high`` is the largest index, a scalar or one per channel (the last
    axis), so a channel has ``high + 1`` values (``num_values``); networks
    embed such entries rather than scale them.
    """

    low: object
    high: object
    shape: tuple[int, ...]
    dtype: jnp.dtype = jnp.float32
    categorical: bool = False

    def sample(self, key: jax.Array) -> jax.Array:
        if jnp.issubdtype(self.dtype, jnp.bool_):
            return jax.random.bernoulli(key, 0.5, self.shape)
        if jnp.issubdtype(self.dtype, jnp.integer):
            low = jnp.broadcast_to(jnp.asarray(self.low, jnp.int32), self.shape)
            high = jnp.broadcast_to(jnp.asarray(self.high, jnp.int32), self.shape)
            x = jax.random.randint(key, self.shape, low, high + 1, jnp.int32)
            return x.astype(self.dtype)
        low = jnp.broadcast_to(jnp.asarray(self.low, self.dtype), self.shape)
        high = jnp.broadcast_to(jnp.asarray(self.high, self.dtype), self.shape)
        # Unbounded dimensions are sampled from a unit normal, like gymnasium.
        finite = jnp.isfinite(low) & jnp.isfinite(high)
        u = jax.random.uniform(key, self.shape, self.dtype)
        n = jax.random.normal(key, self.shape, self.dtype)
        return jnp.where(finite, low + u * (high - low), n)

    def contains(self, x: jax.Array) -> jax.Array:
        return jnp.all((x >= self.low) & (x <= self.high))

    @property
    def num_values(self) -> tuple[int, ...]:
        """Values of each channel (last axis; one entry for a scalar
        ``high``) of a categorical Box: ``high + 1``."""
        high = np.asarray(self.high)
        if high.ndim == 0:
            return (int(high) + 1,)
        per_channel = high.reshape(-1, high.shape[-1]).max(axis=0)
        return tuple(int(h) + 1 for h in per_channel)

    def categorical_problem(self) -> str | None:
        """Why a categorical Box cannot hold indices (None if it can, or if
        it is not categorical)."""
        if not self.categorical:
            return None
        if not jnp.issubdtype(jnp.dtype(self.dtype), jnp.integer):
            return "needs an integer dtype (its entries are indices)"
        if np.any(np.asarray(self.low) != 0):
            return f"has low {self.low}, not 0 (indices count from 0)"
        high = np.asarray(self.high)
        channels = self.shape[-1] if self.shape else None
        if high.ndim > 1 or (high.ndim == 1 and high.shape[0] != channels):
            return f"has high of shape {list(high.shape)}: give one per channel or one"
        return None
