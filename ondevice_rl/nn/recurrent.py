"""Networks with memory: a recurrent core between the observation and a head.

``MemoryNet(head, kind, size)`` steps one observation at a time:
``(carry, obs [..., *obs_shape], first [...]) -> (carry, head output)``. The
observation goes through the image/vector torso and a ``size``-wide ReLU
embedding into a GRU (or LSTM) cell whose output feeds ``head`` (an
``ActorCritic`` or ``QNetwork`` on vectors). Where ``first`` is true (an
observation that starts an episode) the carry starts afresh before the step,
so one scan over a rollout replays episodes exactly as they were acted.
``unroll`` runs that scan over ``[T, ...]`` sequences.

The GRU is ``GRU``: flax's ``GRUCell`` (same parameters, names and
initialisation) computed as two matmuls, the input's three gate projections
``[..., 3 * size]`` at once and the carry's at once: a sequential scan pays
per op, and flax's cell runs six matmuls per step. ``unroll`` goes further:
it embeds a whole ``[T, M]`` sequence and projects its gate terms before
the scan (one large matmul each), so each scanned step is the carry's
matmul and the gates only.
"""

from collections.abc import Sequence
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.cpu.layers import dense, sequential_under_vmap
from ondevice_rl.nn.networks import CONV_CHANNELS, torso
from ondevice_rl.scans import unrolled_off_cpu

MEMORY_KINDS = ("gru", "lstm")


def initial_carry(kind: str, size: int, batch_shape: tuple[int, ...]) -> Any:
    """The carry at an episode's start: zeros ``[*batch_shape, size]`` (an
    LSTM's is a pair of them)."""
    zeros = jnp.zeros((*batch_shape, size), jnp.float32)
    return (zeros, zeros) if kind == "lstm" else zeros


class _Weights(nn.Module):
    """A ``Dense`` layer's parameters (same names, shapes and initialisation),
    returned unapplied: ``(kernel [in_features, features], bias [features] or
    None)``."""

    features: int
    kernel_init: Any
    use_bias: bool

    @nn.compact
    def __call__(self, in_features: int):
        kernel = self.param("kernel", self.kernel_init, (in_features, self.features))
        bias = self.param("bias", nn.zeros, (self.features,)) if self.use_bias else None
        return kernel, bias


class GRUWeights(NamedTuple):
    """A GRU's gates side by side (reset, update, candidate)."""

    input_kernel: jax.Array  # [in_features, 3 * size]
    input_bias: jax.Array  # [3 * size]
    carry_kernel: jax.Array  # [size, 3 * size]
    candidate_bias: jax.Array  # [size], added to the carry's candidate term


class GRU(nn.Module):
    """``nn.GRUCell(size)``'s parameters and arithmetic in fused form:
    ``weights(in_features)`` gives them side by side, ``project`` the input's
    gate terms, ``gru_step`` the rest (see the module docstring)."""

    size: int
    recurrent_kernel_init: Any

    @nn.compact
    def weights(self, in_features: int) -> GRUWeights:
        inputs, carries = [], []
        for gate in "rzn":  # flax's order: ir, hr, iz, hz, in, hn
            input_init = nn.initializers.lecun_normal()
            inputs.append(
                _Weights(self.size, input_init, True, name=f"i{gate}")(in_features)
            )
            carry_weights = _Weights(
                self.size, self.recurrent_kernel_init, gate == "n", name=f"h{gate}"
            )
            carries.append(carry_weights(self.size))
        return GRUWeights(
            jnp.concatenate([k for k, _ in inputs], axis=-1),
            jnp.concatenate([b for _, b in inputs]),
            jnp.concatenate([k for k, _ in carries], axis=-1),
            carries[2][1],
        )

    def __call__(self, carry: jax.Array, inputs: jax.Array):
        """One step, as ``nn.GRUCell``: ``(carry, carry)``."""
        w = self.weights(inputs.shape[-1])
        carry = gru_step(w, carry, project(w, inputs))
        return carry, carry


def project(w: GRUWeights, inputs: jax.Array) -> jax.Array:
    """``[..., in_features] -> [..., 3 * size]``: the input's gate terms."""
    return inputs @ w.input_kernel + w.input_bias


def gru_step(w: GRUWeights, h: jax.Array, gates_in: jax.Array) -> jax.Array:
    """The next carry ``[..., size]`` from ``h`` and ``project``'s terms."""
    size = h.shape[-1]
    gates_h = h @ w.carry_kernel
    r = jax.nn.sigmoid(gates_in[..., :size] + gates_h[..., :size])
    z = jax.nn.sigmoid(gates_in[..., size : 2 * size] + gates_h[..., size : 2 * size])
    n = jnp.tanh(
        gates_in[..., 2 * size :] + r * (gates_h[..., 2 * size :] + w.candidate_bias)
    )
    return (1.0 - z) * n + z * h


class Embed(nn.Module):
    """``[..., *obs_shape] -> [..., size]``: the torso, then a ReLU layer."""

    size: int
    obs_ndim: int = 1
    conv: Sequence[int] = CONV_CHANNELS

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        x = torso(obs, self.obs_ndim, self.conv)
        return nn.relu(dense(self.size, np.sqrt(2))(x))


class MemoryNet(nn.Module):
    """``head`` behind a recurrent core (see the module docstring)."""

    head: nn.Module
    kind: str = "gru"
    size: int = 128
    obs_ndim: int = 1
    conv: Sequence[int] = CONV_CHANNELS

    def setup(self):
        self.embed = Embed(self.size, self.obs_ndim, self.conv)
        # Orthogonal init is a QR: one per member under vmap
        # (layers.sequential_under_vmap).
        inits = dict(
            recurrent_kernel_init=sequential_under_vmap(nn.initializers.orthogonal())
        )
        if self.kind == "lstm":
            self.cell = nn.OptimizedLSTMCell(self.size, **inits)
        else:
            self.cell = GRU(self.size, **inits)

    def __call__(self, carry: Any, obs: jax.Array, first: jax.Array):
        carry, features = self.core(carry, obs, first)
        return carry, self.head(features)

    def core(self, carry: Any, obs: jax.Array, first: jax.Array):
        """One step of the recurrent core: ``(carry, features [..., size])``."""
        return self.recur(carry, self.cell_inputs(obs), first)

    def heads(self, features: jax.Array) -> Any:
        return self.head(features)

    def cell_inputs(self, obs: jax.Array) -> jax.Array:
        """What a step's cell reads from its observation: the embedding
        ``[..., size]``, or for the GRU its gate terms ``[..., 3 * size]``
        (``project``); a whole sequence at once."""
        x = self.embed(obs)
        if self.kind == "lstm":
            return x
        return project(self.gru_weights(), x)

    def gru_weights(self) -> GRUWeights:
        return self.cell.weights(self.size)

    def recur(
        self,
        carry: Any,
        inputs: jax.Array,
        first: jax.Array,
        weights: GRUWeights | None = None,
    ):
        """A step from ``cell_inputs``: ``(carry, features)``; the carry
        starts afresh where ``first``. A scan passes the GRU's ``weights``
        (``gru_weights``), gathered once outside it."""
        fresh = initial_carry(self.kind, self.size, first.shape)
        carry = jax.tree.map(
            lambda c, f: jnp.where(first[..., None], f, c), carry, fresh
        )
        if self.kind == "lstm":
            return self.cell(carry, inputs)
        weights = self.gru_weights() if weights is None else weights
        carry = gru_step(weights, carry, inputs)
        return carry, carry


#: Steps of the recurrence per scan iteration off CPU (``unrolled_off_cpu``).
UNROLL = 8


def unroll(
    net: MemoryNet, params: Any, carry: Any, obs: jax.Array, first: jax.Array
) -> Any:
    """``net`` over a sequence from ``carry`` (``[M, ...]``): ``obs`` ``[T, M,
    *obs_shape]``, ``first`` ``[T, M]``; returns the head's outputs for all
    ``[T, M]`` steps. The embedding (and the GRU's input projection) and the
    head run once on the stacked sequence, the recurrence alone is scanned;
    the same numbers as stepping ``core``, up to the matmuls' rounding."""
    inputs = net.apply(params, obs, method=MemoryNet.cell_inputs)
    weights = None
    if net.kind != "lstm":
        weights = net.apply(params, method=MemoryNet.gru_weights)

    def step(carry, xs):
        return net.apply(params, carry, *xs, weights, method=MemoryNet.recur)

    with jax.named_scope("recurrence"):
        _, features = unrolled_off_cpu(step, carry, (inputs, first), UNROLL)
    return net.apply(params, features, method=MemoryNet.heads)
