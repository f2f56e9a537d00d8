"""Minibatches for one epoch: a random permutation, then a split.

``shuffled_minibatches`` turns ``[N, ...]`` samples into ``[M, N / M, ...]``
for a ``lax.scan`` over minibatch steps.
"""

from typing import Any

import jax
import jax.numpy as jnp

from ondevice_rl.cpu.permutation import permutation


def shuffled_minibatches(key: jax.Array, samples: Any, num_minibatches: int) -> Any:
    """Every ``[N, ...]`` leaf permuted the same way and split: ``[M, N/M, ...]``."""
    n = jax.tree.leaves(samples)[0].shape[0]
    perm = permutation(key, n)
    return jax.tree.map(
        lambda x: jnp.take(x, perm, axis=0).reshape(
            (num_minibatches, n // num_minibatches) + x.shape[1:]
        ),
        samples,
    )
