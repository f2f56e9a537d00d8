"""A circular replay buffer in device memory: a pytree of arrays, pure functions.

The buffer is a NamedTuple of arrays, so it lives inside a learner's train
state: it is carried through ``lax.scan``, vmapped over seeds, sharded and
checkpointed with everything else. It stores whole vector steps of ``B``
environments, time-major, the layout ``rollout`` produces::

    buffer = ReplayBuffer.create(example, capacity)  # example leaves [B, ...]
    buffer = buffer.add(traj)  # traj leaves [T, B, ...], e.g. a Transition
    seqs = buffer.sample(key, batch_size=128, length=3)  # leaves [3, 128, ...]

``sample`` draws ``batch_size`` sequences of ``length`` consecutive steps of
one environment each, uniformly (with replacement) among the sequences lying
wholly in the stored window, so ``length > 1`` gives n-step returns their
data. A sequence may cross an episode boundary: store ``terminated``,
``truncated`` and ``final_obs`` (``rollout``'s ``Transition`` does) and let
``ondevice_rl.returns.n_step_returns`` stop there.

Why not flashbax (whose trajectory buffer does the same): this stores rows in
the rollout's ``[T, B]`` order (no transpose on add), writes a one-step add as
a ``dynamic_update_slice`` instead of a scatter, samples through one flat
gather per leaf, and its state is a plain NamedTuple like the rest of the
train state.
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp


class ReplayBuffer(NamedTuple):
    """Stored steps and how many were written.

    Attributes:
        data: the stored pytree, leaves ``[C, B, ...]`` (``C`` time rows of
            ``B`` environments; row ``added % C`` is written next).
        added: ``[]`` int32, time rows written so far (all time, not capped).
    """

    data: Any
    added: jax.Array

    @classmethod
    def create(cls, example: Any, capacity: int) -> "ReplayBuffer":
        """An empty buffer of ``capacity`` time rows shaped like ``example``
        (one vector step, leaves ``[B, ...]``), zero-filled."""
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        data = jax.tree.map(
            lambda x: jnp.zeros((capacity,) + jnp.shape(x), jnp.asarray(x).dtype),
            example,
        )
        return cls(data, jnp.int32(0))

    @property
    def capacity(self) -> int:
        """``C``, time rows held (static)."""
        return jax.tree.leaves(self.data)[0].shape[0]

    @property
    def num_envs(self) -> int:
        """``B``, environments per time row (static)."""
        return jax.tree.leaves(self.data)[0].shape[1]

    def size(self) -> jax.Array:
        """``[]`` int32, time rows currently held (``min(added, C)``)."""
        return jnp.minimum(self.added, self.capacity)

    def can_sample(self, length: int = 1) -> jax.Array:
        """``[]`` bool: whether a sequence of ``length`` steps is stored."""
        return self.size() >= length

    def add(self, items: Any) -> "ReplayBuffer":
        """Appends ``T`` time rows (leaves ``[T, B, ...]``, ``T <= C``),
        overwriting the oldest once full."""
        num_rows = jax.tree.leaves(items)[0].shape[0]
        capacity = self.capacity
        if num_rows > capacity:
            raise ValueError(f"adding {num_rows} rows to a buffer of {capacity}")
        start = self.added % capacity
        if num_rows == 1:  # the common case: one vector step, never wraps

            def write(store, new):
                index = (start,) + (0,) * (store.ndim - 1)
                return jax.lax.dynamic_update_slice(
                    store, new.astype(store.dtype), index
                )

        else:
            rows = (start + jnp.arange(num_rows)) % capacity

            def write(store, new):
                return store.at[rows].set(
                    new.astype(store.dtype),
                    unique_indices=True,
                    mode="promise_in_bounds",
                )

        data = jax.tree.map(write, self.data, items)
        return ReplayBuffer(data, self.added + num_rows)

    def sample(self, key: jax.Array, batch_size: int, length: int = 1) -> Any:
        """``batch_size`` stored sequences of ``length`` consecutive steps.

        Each sequence is one environment's steps ``t .. t+length-1`` with the
        start uniform over the sequences held (with replacement), the
        environment uniform over ``B``. Returns leaves ``[length, batch_size,
        ...]`` (time-major, as ``ondevice_rl.returns`` expects). Garbage (the
        zero fill) unless ``can_sample(length)``.
        """
        capacity, num_envs = self.capacity, self.num_envs
        size = self.size()
        oldest = self.added - size  # logical index of the oldest row held
        # One uniform draw for both indices: a randint hashes three times (a
        # split, two draws), and each hash is a sizeable block to compile.
        u = jax.random.uniform(key, (2, batch_size))
        starts = _scale(u[0], size - length + 1)
        envs = _scale(u[1], num_envs)
        rows = (oldest + starts + jnp.arange(length)[:, None]) % capacity
        flat = rows * num_envs + envs  # [length, batch_size] into [C * B]

        def gather(store):
            flat_store = store.reshape((capacity * num_envs,) + store.shape[2:])
            return flat_store.at[flat].get(
                mode="promise_in_bounds", wrap_negative_indices=False
            )

        return jax.tree.map(gather, self.data)


def _scale(u: jax.Array, n: jax.Array | int) -> jax.Array:
    """Uniform ``[0, 1)`` floats to int32 in ``[0, n)`` (``n >= 1``), uniform
    up to the float32 draw's 2^-23 resolution (a bias below 1e-3 for ``n`` up
    to 8,000)."""
    n = jnp.asarray(n, jnp.int32)
    index = jnp.floor(u * n.astype(jnp.float32)).astype(jnp.int32)
    return jnp.clip(index, 0, n - 1)
