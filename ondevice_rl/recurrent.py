"""Networks with memory: a recurrent core between the observation and a head.

``MemoryNet(head, kind, size)`` steps one observation at a time:
``(carry, obs [..., *obs_shape], first [...]) -> (carry, head output)``. The
observation goes through the image/vector torso and a ``size``-wide ReLU
embedding into a GRU (or LSTM) cell whose output feeds ``head`` (an
``ActorCritic`` or ``QNetwork`` on vectors). Where ``first`` is true (an
observation that starts an episode) the carry starts afresh before the step,
so one scan over a rollout replays episodes exactly as they were acted.
``unroll`` runs that scan over ``[T, ...]`` sequences.
"""

from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.networks import CONV_CHANNELS, _dense, sequential_under_vmap, torso

MEMORY_KINDS = ("gru", "lstm")


def initial_carry(kind: str, size: int, batch_shape: tuple[int, ...]) -> Any:
    """The carry at an episode's start: zeros ``[*batch_shape, size]`` (an
    LSTM's is a pair of them)."""
    zeros = jnp.zeros((*batch_shape, size), jnp.float32)
    return (zeros, zeros) if kind == "lstm" else zeros


class Embed(nn.Module):
    """``[..., *obs_shape] -> [..., size]``: the torso, then a ReLU layer."""

    size: int
    obs_ndim: int = 1
    conv: Sequence[int] = CONV_CHANNELS

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        x = torso(obs, self.obs_ndim, self.conv)
        return nn.relu(_dense(self.size, np.sqrt(2))(x))


class MemoryNet(nn.Module):
    """``head`` behind a recurrent core (see the module docstring)."""

    head: nn.Module
    kind: str = "gru"
    size: int = 128
    obs_ndim: int = 1
    conv: Sequence[int] = CONV_CHANNELS

    def setup(self):
        self.embed = Embed(self.size, self.obs_ndim, self.conv)
        # Orthogonal init is a QR: one per member under vmap (see networks).
        inits = dict(
            recurrent_kernel_init=sequential_under_vmap(nn.initializers.orthogonal())
        )
        if self.kind == "lstm":
            self.cell = nn.OptimizedLSTMCell(self.size, **inits)
        else:
            self.cell = nn.GRUCell(self.size, **inits)

    def __call__(self, carry: Any, obs: jax.Array, first: jax.Array):
        carry, features = self.core(carry, obs, first)
        return carry, self.head(features)

    def core(self, carry: Any, obs: jax.Array, first: jax.Array):
        """One step of the recurrent core: ``(carry, features [..., size])``."""
        fresh = initial_carry(self.kind, self.size, first.shape)
        carry = jax.tree.map(
            lambda c, f: jnp.where(first[..., None], f, c), carry, fresh
        )
        return self.cell(carry, self.embed(obs))

    def heads(self, features: jax.Array) -> Any:
        return self.head(features)


def unroll(
    net: MemoryNet, params: Any, carry: Any, obs: jax.Array, first: jax.Array
) -> Any:
    """``net`` over a sequence from ``carry`` (``[M, ...]``): ``obs`` ``[T, M,
    *obs_shape]``, ``first`` ``[T, M]``; returns the head's outputs for all
    ``[T, M]`` steps, the head applied once to the stacked features."""

    def step(carry, inputs):
        return net.apply(params, carry, *inputs, method=MemoryNet.core)

    _, features = jax.lax.scan(step, carry, (obs, first))
    return net.apply(params, features, method=MemoryNet.heads)
