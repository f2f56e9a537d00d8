"""Networks (flax.linen): actor-critic, Q-network, and the policy
distributions they feed.

Networks work on one observation or a batch: shapes ``[..., *obs_shape]`` in,
``[..., num_actions]`` (or ``[..., action_dim]``) and ``[...]`` out. The torso
is chosen by the observation's rank ``obs_ndim`` (``len(obs_shape)``, which the
networks cannot guess from a batch): vectors ``[..., D]`` go straight to the
MLP, images ``[..., H, W, C]`` (MinAtar's ``[10, 10, C]``, say) through a small
CNN (3×3 convolutions, ReLU, flatten) first, and any other rank is flattened.
"""

from collections.abc import Sequence
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.cpu.layers import Conv3x3, dense

ACTIVATIONS = {"tanh": nn.tanh, "relu": nn.relu, "gelu": nn.gelu, "swish": nn.swish}
#: Channels of the image torso's 3×3 convolutions (stride 1, VALID padding):
#: MinAtar's one layer of 16 (Young & Tian, 2019), ``[10, 10, C] -> [1024]``.
CONV_CHANNELS = (16,)


def torso(x: jax.Array, obs_ndim: int, conv: Sequence[int]) -> jax.Array:
    """``[..., *obs_shape] -> [..., F]`` features for the MLP (call it inside a
    compact module). Rank 1: ``x`` itself; rank 3 ``[..., H, W, C]``: ``conv``
    3×3 ReLU convolutions, flattened; other ranks: flattened. ``obs_ndim``
    may instead be an ``ondevice_rl.nn.encoders.ObsLayout`` (pytree, pixel,
    integer or categorical observations), which encodes ``x`` itself."""
    if not isinstance(obs_ndim, int):
        return obs_ndim.encode(x)
    batch = x.shape[: x.ndim - obs_ndim]
    if obs_ndim == 1:
        return x
    if obs_ndim == 3:
        for channels in conv:
            x = nn.relu(Conv3x3(channels)(x))
    return x.reshape((*batch, -1))


class MLP(nn.Module):
    """Hidden layers with orthogonal(√2) init, then a linear head, on top of
    the ``torso`` for observations of rank ``obs_ndim``.

    ``layer_norm`` puts a LayerNorm before each hidden activation (PQN's
    normalised Q-network).
    """

    hidden: Sequence[int]
    out: int
    out_scale: float
    activation: str = "tanh"
    layer_norm: bool = False
    obs_ndim: int = 1
    conv: Sequence[int] = CONV_CHANNELS

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = ACTIVATIONS[self.activation]
        x = torso(x, self.obs_ndim, self.conv)
        # The activation that layers after the first read, applied straight
        # to the matmul before them (None with a LayerNorm between).
        fed_by = None if self.layer_norm else self.activation
        for i, width in enumerate(self.hidden):
            x = dense(width, np.sqrt(2), input_activation=fed_by if i else None)(x)
            if self.layer_norm:
                x = nn.LayerNorm()(x)
            x = act(x)
        head_input = fed_by if self.hidden else None
        return dense(self.out, self.out_scale, input_activation=head_input)(x)


class QNetwork(nn.Module):
    """Action values ``[..., *obs_shape] -> [..., num_actions]`` (``obs_ndim =
    len(obs_shape)`` picks the torso)."""

    num_actions: int
    hidden: Sequence[int] = (120, 84)
    activation: str = "relu"
    layer_norm: bool = False
    obs_ndim: int = 1
    conv: Sequence[int] = CONV_CHANNELS

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        mlp = MLP(
            self.hidden,
            self.num_actions,
            1.0,
            self.activation,
            self.layer_norm,
            self.obs_ndim,
            self.conv,
        )
        return mlp(obs)


class PolicyOutput(NamedTuple):
    """``logits`` ``[..., A]`` (discrete) or Gaussian ``mean`` ``[..., A]`` with
    ``log_std`` ``[A]`` (continuous; ``log_std`` is None for discrete)."""

    logits_or_mean: jax.Array
    log_std: jax.Array | None
    value: jax.Array  # [...]


class ActorCritic(nn.Module):
    """Separate actor and critic networks (each its own torso and MLP)
    evaluated in one call: ``[..., *obs_shape]`` with ``obs_ndim =
    len(obs_shape)``.

    For continuous actions the log standard deviation is a learned,
    state-independent vector.
    """

    action_dim: int
    continuous: bool
    hidden: Sequence[int] = (64, 64)
    activation: str = "tanh"
    obs_ndim: int = 1
    conv: Sequence[int] = CONV_CHANNELS

    def setup(self):
        shape = {"obs_ndim": self.obs_ndim, "conv": self.conv}
        self.actor = MLP(self.hidden, self.action_dim, 0.01, self.activation, **shape)
        self.critic = MLP(self.hidden, 1, 1.0, self.activation, **shape)
        if self.continuous:
            self.log_std = self.param("log_std", nn.zeros, (self.action_dim,))

    def __call__(self, obs: jax.Array) -> PolicyOutput:
        log_std = self.log_std if self.continuous else None
        return PolicyOutput(self.actor(obs), log_std, self.value(obs))

    def value(self, obs: jax.Array) -> jax.Array:
        """Critic only: ``[..., *obs_shape] -> [...]``."""
        return self.critic(obs)[..., 0]


# --- distributions -------------------------------------------------------------
# Written on the two parameterisations we need, so log-probabilities stay free of
# gathers (a gather's gradient is a scatter, slow on CPU) and vmap cleanly.


def sample_action(key: jax.Array, pi: PolicyOutput) -> jax.Array:
    """Samples ``[...]`` int32 (discrete) or ``[..., A]`` float (continuous)."""
    if pi.log_std is None:
        return jax.random.categorical(key, pi.logits_or_mean).astype(jnp.int32)
    noise = jax.random.normal(key, pi.logits_or_mean.shape)
    return pi.logits_or_mean + jnp.exp(pi.log_std) * noise


def log_prob(pi: PolicyOutput, action: jax.Array) -> jax.Array:
    """Log-probability ``[...]`` of ``action`` under ``pi``."""
    if pi.log_std is None:
        logp_all = jax.nn.log_softmax(pi.logits_or_mean)
        num_actions = pi.logits_or_mean.shape[-1]
        return jnp.sum(logp_all * jax.nn.one_hot(action, num_actions), axis=-1)
    z = (action - pi.logits_or_mean) * jnp.exp(-pi.log_std)
    per_dim = -0.5 * z**2 - pi.log_std - 0.5 * jnp.log(2 * jnp.pi)
    return jnp.sum(per_dim, axis=-1)


def entropy(pi: PolicyOutput) -> jax.Array:
    """Entropy ``[...]`` of ``pi``."""
    if pi.log_std is None:
        logp_all = jax.nn.log_softmax(pi.logits_or_mean)
        return -jnp.sum(jnp.exp(logp_all) * logp_all, axis=-1)
    per_dim = pi.log_std + 0.5 * jnp.log(2 * jnp.pi * jnp.e)
    return jnp.broadcast_to(jnp.sum(per_dim), pi.value.shape)
