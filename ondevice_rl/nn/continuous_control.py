"""Networks and the squashed Gaussian of off-policy continuous control (SAC,
TD3), on the torso and dense layers of ``ondevice_rl.nn.networks``.

Actors act in the unit box ``[-1, 1]^A``; ``BoxScale`` maps that box onto an
environment's ``Box`` (``low + (u + 1)·(high − low)/2``), so critics, replay
buffers and exploration noise all work in one scale whatever the env's
bounds. Shapes: observations ``[..., *obs_shape]`` (``obs_ndim =
len(obs_shape)`` picks the torso), unit actions ``[..., A]``.

* ``SquashedGaussianActor``: ``obs -> (mean, log_std)`` of a Gaussian before
  ``tanh`` (SAC); ``squashed_sample`` draws ``u = tanh(x)`` with its
  log-density, corrected for the squashing.
* ``DeterministicActor``: ``obs -> tanh(MLP(obs))`` (TD3).
* ``TwinCritic``: ``(obs, action) -> Q [..., num_critics]``, the critics as
  one vmapped module (one batched matmul per layer).
"""

from collections.abc import Sequence
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.env.spaces import Box
from ondevice_rl.nn.networks import CONV_CHANNELS, MLP, torso

#: Bounds of the Gaussian's log standard deviation (rejax's SAC bounds).
LOG_STD_RANGE = (-10.0, 2.0)
_LOG_2 = float(np.log(2.0))
_LOG_SQRT_2PI = float(0.5 * np.log(2.0 * np.pi))


class BoxScale(NamedTuple):
    """The affine map from ``[-1, 1]^A`` to a ``Box``: ``center + half·u``."""

    center: np.ndarray  # [A] float32
    half: np.ndarray  # [A] float32, half the width of the box

    @classmethod
    def of(cls, space: Box) -> "BoxScale":
        """The map onto ``space`` (a rank-1 ``Box``); ValueError (one line)
        if a bound is infinite."""
        shape = tuple(space.shape)
        low = np.broadcast_to(np.asarray(space.low, np.float32), shape)
        high = np.broadcast_to(np.asarray(space.high, np.float32), shape)
        if len(shape) != 1:
            raise ValueError(f"the action Box must have rank 1, got shape {shape}")
        if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
            raise ValueError(
                f"the action Box must be bounded, got low={low.tolist()} "
                f"high={high.tolist()}"
            )
        return cls((high + low) / 2, (high - low) / 2)

    def to_box(self, unit: jax.Array) -> jax.Array:
        """``[..., A]`` unit actions to the box."""
        return self.center + self.half * unit


def squashed_sample(
    key: jax.Array, mean: jax.Array, log_std: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """``u = tanh(x)``, ``x ~ N(mean, exp(log_std)²)``: ``(u [..., A],
    log π(u) [...])``.

    ``log π(u) = Σ log N(x) − Σ log(1 − tanh²(x))``, the second term written
    ``2·(log 2 − x − softplus(−2x))`` (exact, and finite where ``tanh``
    saturates). The density is that of ``u`` in the unit box; the affine map
    to the env's box adds the constant ``−Σ log half``.
    """
    noise = jax.random.normal(key, mean.shape, mean.dtype)
    x = mean + jnp.exp(log_std) * noise
    gaussian = -0.5 * noise**2 - log_std - _LOG_SQRT_2PI
    log_det = 2.0 * (_LOG_2 - x - jax.nn.softplus(-2.0 * x))
    return jnp.tanh(x), jnp.sum(gaussian - log_det, axis=-1)


class SquashedGaussianActor(nn.Module):
    """``obs -> (mean [..., A], log_std [..., A])`` of the Gaussian before
    ``tanh``; ``log_std`` clipped to ``LOG_STD_RANGE``. The deterministic
    action is ``tanh(mean)``."""

    action_dim: int
    hidden: Sequence[int] = (64, 64)
    activation: str = "relu"
    obs_ndim: int = 1
    conv: Sequence[int] = CONV_CHANNELS

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        out = MLP(
            self.hidden,
            2 * self.action_dim,
            0.01,
            self.activation,
            obs_ndim=self.obs_ndim,
            conv=self.conv,
        )(obs)
        mean, log_std = jnp.split(out, 2, axis=-1)
        return mean, jnp.clip(log_std, *LOG_STD_RANGE)


class DeterministicActor(nn.Module):
    """``obs -> tanh(MLP(obs))``, ``[..., A]`` in the unit box."""

    action_dim: int
    hidden: Sequence[int] = (64, 64)
    activation: str = "relu"
    obs_ndim: int = 1
    conv: Sequence[int] = CONV_CHANNELS

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        mlp = MLP(
            self.hidden,
            self.action_dim,
            1.0,
            self.activation,
            obs_ndim=self.obs_ndim,
            conv=self.conv,
        )
        return jnp.tanh(mlp(obs))


class Critic(nn.Module):
    """One action value ``(obs [..., *obs_shape], action [..., A]) -> [...]``:
    the observation's torso features and the action, concatenated, then an
    MLP."""

    hidden: Sequence[int] = (64, 64)
    activation: str = "relu"
    obs_ndim: int = 1
    conv: Sequence[int] = CONV_CHANNELS

    @nn.compact
    def __call__(self, obs: jax.Array, action: jax.Array) -> jax.Array:
        features = torso(obs, self.obs_ndim, self.conv)
        x = jnp.concatenate([features, action.astype(features.dtype)], axis=-1)
        return MLP(self.hidden, 1, 1.0, self.activation)(x)[..., 0]


class TwinCritic(nn.Module):
    """``num_critics`` independent ``Critic``s of ``(obs, action)``: ``Q
    [..., num_critics]``. Their parameters carry a leading
    ``[num_critics]`` axis."""

    hidden: Sequence[int] = (64, 64)
    activation: str = "relu"
    obs_ndim: int = 1
    conv: Sequence[int] = CONV_CHANNELS
    num_critics: int = 2

    @nn.compact
    def __call__(self, obs: jax.Array, action: jax.Array) -> jax.Array:
        ensemble = nn.vmap(
            Critic,
            variable_axes={"params": 0},
            split_rngs={"params": True},
            in_axes=0,
            out_axes=-1,
            axis_size=self.num_critics,
        )
        # Each critic gets its own (broadcast) copy of the inputs: with shared
        # inputs the first layers fuse into one [..., num_critics * H] matmul
        # whose output every later layer reads transposed.
        n = self.num_critics
        obs, action = jax.tree.map(
            lambda a: jnp.broadcast_to(a, (n, *a.shape)), (obs, action)
        )
        return ensemble(self.hidden, self.activation, self.obs_ndim, self.conv)(
            obs, action
        )
