"""Torsos for observations that are not one small float array: pytrees of
leaves, pixels, categorical grids.

``observation_encoding(space)`` reads the observation space (without its
action mask) once and returns what the networks' torso needs:

* the rank of the observation (an ``int``) for one float32, non-categorical
  ``Box`` that is a vector, a small image (MinAtar's ``[10, 10, C]``) or
  another rank: today's torso (``ondevice_rl.nn.networks.torso``), unchanged;
* an ``ObsLayout`` otherwise, whose ``ObsEncoder`` encodes each leaf by its
  kind and concatenates the features:

  - ``vector`` (rank 0 or 1) and ``flat`` (other ranks but 3): cast to
    float32, flattened;
  - ``image`` (rank 3, both sides ≤ ``PIXEL_SIDE``): 3×3 ReLU convolutions
    (the image torso's channels), flattened;
  - ``pixels`` (rank 3, a side > ``PIXEL_SIDE``): a strided torso with
    Nature-DQN's kernels (8, 4, 3; strides 4, 2, 2; SAME padding), so a
    ``[128, 128, 3]`` frame gives 4,096 features, not 49,152 per conv
    channel;
  - ``categorical`` (a categorical ``Box`` or a ``Discrete`` leaf): each
    index embedded (a table per channel, ``EMBED_SIZE`` wide), the
    channels' embeddings concatenated; a grid ``[H, W, C]`` then goes
    through the 3×3 convolutions, like an image.

Integer intensities (uint8 pixels, counts) are divided by the space's
``high``, so a frame reaches the network in ``[0, 1]``; bool leaves become
0/1. Observations are stored in their own dtypes and cast here.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.cpu.layers import Conv3x3, sequential_under_vmap
from ondevice_rl.env.masks import split_action_mask
from ondevice_rl.env.spaces import Box, Discrete

#: Rank-3 leaves with a side longer than this go through the strided torso.
PIXEL_SIDE = 32
#: Width of one categorical channel's embedding.
EMBED_SIZE = 8
#: The strided pixel torso: (channels, kernel side, stride) per layer.
PIXEL_LAYERS = ((32, 8, 4), (64, 4, 2), (64, 3, 2))


@dataclass(frozen=True)
class LeafEncoding:
    """How one observation leaf becomes features (static)."""

    kind: str  # "vector", "flat", "image", "pixels" or "categorical"
    shape: tuple[int, ...]
    scale: float = 1.0  # integer intensities are divided by it
    num_values: tuple[int, ...] = ()  # categorical: values per channel


@dataclass(frozen=True)
class ObsLayout:
    """The encodings of an observation's leaves, in ``jax.tree.leaves``
    order, and the 3×3 convolutions' channels of images and grids."""

    leaves: tuple[LeafEncoding, ...]
    conv: tuple[int, ...] = (16,)

    def encode(self, obs: Any) -> jax.Array:
        """``obs`` (leaves ``[..., *shape]``) -> ``[..., F]`` features; call
        it inside a compact flax module (the torso does)."""
        return ObsEncoder(self)(obs)


def _is_space(x: Any) -> bool:
    return isinstance(x, (Box, Discrete))


def _intensity_scale(space: Box) -> float:
    if not jnp.issubdtype(jnp.dtype(space.dtype), jnp.integer):
        return 1.0
    high = float(np.max(np.asarray(space.high)))
    return high if np.isfinite(high) and high > 0 else 1.0


def leaf_encoding(space: Box | Discrete) -> LeafEncoding:
    """The encoding of one leaf's space, chosen by its kind and shape."""
    if isinstance(space, Discrete):
        return LeafEncoding("categorical", (), num_values=(int(space.n),))
    shape = tuple(int(n) for n in space.shape)
    if space.categorical:
        return LeafEncoding("categorical", shape, num_values=space.num_values)
    scale = _intensity_scale(space)
    if len(shape) <= 1:
        return LeafEncoding("vector", shape, scale)
    if len(shape) == 3:
        kind = "pixels" if max(shape[:2]) > PIXEL_SIDE else "image"
        return LeafEncoding(kind, shape, scale)
    return LeafEncoding("flat", shape, scale)


def observation_encoding(space: Any) -> int | ObsLayout:
    """The torso's description for observations of ``space`` (its action
    mask left out): the rank for one small float32 array, else an
    ``ObsLayout`` (see the module docstring)."""
    space, _ = split_action_mask(space)
    if _is_space(space):
        encoding = leaf_encoding(space)
        plain = isinstance(space, Box) and jnp.dtype(space.dtype) == jnp.float32
        if plain and encoding.kind != "pixels" and not space.categorical:
            return len(encoding.shape)
    leaves = jax.tree.leaves(space, is_leaf=_is_space)
    return ObsLayout(tuple(leaf_encoding(s) for s in leaves))


def _orthogonal(scale: float):
    # A batched QR (vmap over seeds) can deadlock XLA:CPU: one per member.
    return sequential_under_vmap(nn.initializers.orthogonal(scale))


def _flatten(x: jax.Array, batch: tuple[int, ...]) -> jax.Array:
    return x.reshape((*batch, -1))


class ObsEncoder(nn.Module):
    """``obs`` (a pytree whose leaves match ``layout.leaves``) -> ``[...,
    F]``, each leaf encoded by its kind, features concatenated."""

    layout: ObsLayout

    @nn.compact
    def __call__(self, obs: Any) -> jax.Array:
        leaves = jax.tree.leaves(obs)
        if len(leaves) != len(self.layout.leaves):
            raise ValueError(
                f"observation of {len(leaves)} leaves; its space has "
                f"{len(self.layout.leaves)}"
            )
        features, tables = [], 0
        for x, encoding in zip(leaves, self.layout.leaves, strict=True):
            batch = x.shape[: x.ndim - len(encoding.shape)]
            if encoding.kind == "categorical":
                x = self.embed(x, encoding.num_values, f"embedding_{tables}")
                tables += 1
                if len(encoding.shape) == 3:  # [..., H, W, C, E] -> [..., H, W, C·E]
                    x = self.convolve(x.reshape(x.shape[:-2] + (-1,)), self.layout.conv)
            else:
                x = x.astype(jnp.float32)
                if encoding.scale != 1.0:
                    x = x / encoding.scale
                if encoding.kind == "image":
                    x = self.convolve(x, self.layout.conv)
                elif encoding.kind == "pixels":
                    x = self.pixels(x)
            features.append(_flatten(x, batch))
        return jnp.concatenate(features, axis=-1)

    def embed(self, x: jax.Array, num_values: Sequence[int], name: str) -> jax.Array:
        """Indices ``[..., C]`` (or any shape, one channel) -> ``[..., C, E]``
        from the table ``name`` (one per categorical leaf) whose rows are the
        channels' values in turn; a one-hot product, whose gradient is a
        matmul, not a scatter."""
        sizes = np.asarray(num_values)
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int32)
        index = jnp.clip(x.astype(jnp.int32), 0, jnp.asarray(sizes - 1, jnp.int32))
        index = index + jnp.asarray(offsets)
        total = int(sizes.sum())
        table = self.param(name, nn.initializers.normal(1.0), (total, EMBED_SIZE))
        return jax.nn.one_hot(index, total, dtype=jnp.float32) @ table

    def convolve(self, x: jax.Array, channels: Sequence[int]) -> jax.Array:
        """3×3 ReLU convolutions, stride 1, VALID padding: ``Conv3x3``, one
        matmul on CPU (XLA's convolution gradients inside a learner's loop
        were 3.8× slower there: Navix Empty-8x8 PPO 407 vs 1,559 steps/s)."""
        for width in channels:
            x = nn.relu(Conv3x3(width)(x))
        return x

    def pixels(self, x: jax.Array) -> jax.Array:
        """The strided torso of ``PIXEL_LAYERS``, ReLU after each layer."""
        for width, side, stride in PIXEL_LAYERS:
            conv = nn.Conv(
                width,
                (side, side),
                strides=(stride, stride),
                padding="SAME",
                kernel_init=_orthogonal(2**0.5),
            )
            x = nn.relu(conv(x))
        return x
