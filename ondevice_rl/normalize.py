"""Running observation normalisation and reward scaling, as device state.

Pure functions over NamedTuple states, so a learner keeps them in its train
state (checkpointed, vmapped with the population, donated between segments):

* ``RunningStats``: mean and (population) variance of everything seen, merged
  batch by batch with the parallel-variance formula (Chan et al., 1979) —
  exact whatever the batching, as gymnasium's ``RunningMeanStd``.
  ``normalize(stats, x)`` standardises and clips.
* ``RewardScaler``: per environment the running discounted return ``G ←
  γ·G + r`` (zeroed after an episode ends), and the ``RunningStats`` of those
  returns; rewards are divided by their standard deviation (no mean removed),
  as the common ``NormalizeReward`` / ``VecNormalize`` wrappers do. Steps are
  taken in order, each ``[B]`` batch updating the statistics before its own
  rewards are scaled, so the numbers equal the host wrappers'.

Shapes: ``RunningStats`` over ``shape`` holds ``mean``/``var`` ``[*shape]`` and
a ``[]`` count; ``update`` takes ``[..., *shape]`` (every leading axis is
batch). A pytree observation gets ``LeafStats``: ``RunningStats`` for each
float leaf; integer and bool leaves (indices, pixels, an action mask) pass
through as they are.
"""

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

#: Initial count: gymnasium's ``RunningMeanStd(epsilon=1e-4)``, so the first
#: batch all but replaces the initial mean 0 and variance 1.
INITIAL_COUNT = 1e-4
EPS = 1e-8
CLIP = 10.0


class RunningStats(NamedTuple):
    mean: jax.Array  # [*shape] float32
    var: jax.Array  # [*shape] float32, population variance
    count: jax.Array  # [] float32, samples merged (plus INITIAL_COUNT)


def init_stats(shape: tuple[int, ...] = ()) -> RunningStats:
    """Mean 0, variance 1, count ``INITIAL_COUNT``."""
    return RunningStats(
        jnp.zeros(shape, jnp.float32),
        jnp.ones(shape, jnp.float32),
        jnp.float32(INITIAL_COUNT),
    )


def update(stats: RunningStats, batch: jax.Array) -> RunningStats:
    """Merges ``batch`` ``[..., *shape]`` into ``stats`` (parallel variance)."""
    ndim = stats.mean.ndim
    axes = tuple(range(batch.ndim - ndim))
    batch = batch.astype(jnp.float32)
    batch_count = jnp.float32(math.prod(batch.shape[: len(axes)]))
    batch_mean = jnp.mean(batch, axis=axes)
    batch_var = jnp.var(batch, axis=axes)
    count = stats.count + batch_count
    delta = batch_mean - stats.mean
    mean = stats.mean + delta * (batch_count / count)
    m2 = (
        stats.var * stats.count
        + batch_var * batch_count
        + jnp.square(delta) * (stats.count * batch_count / count)
    )
    return RunningStats(mean, m2 / count, count)


def normalize(
    stats: RunningStats, x: jax.Array, clip: float = CLIP, eps: float = EPS
) -> jax.Array:
    """``clip((x - mean) / sqrt(var + eps), ±clip)``, ``x`` ``[..., *shape]``."""
    z = (x - stats.mean) / jnp.sqrt(stats.var + eps)
    return jnp.clip(z, -clip, clip)


class RewardScaler(NamedTuple):
    returns: jax.Array  # [B] running discounted return of each environment
    stats: RunningStats  # over those returns, shape ()


def init_reward_scaler(num_envs: int) -> RewardScaler:
    return RewardScaler(jnp.zeros((num_envs,), jnp.float32), init_stats(()))


def scale_rewards(
    scaler: RewardScaler,
    reward: jax.Array,
    done: jax.Array,
    gamma: jax.Array,
    clip: float = CLIP,
    eps: float = EPS,
) -> tuple[RewardScaler, jax.Array]:
    """Scales ``[T, B]`` rewards of a rollout; ``done`` ``[T, B]`` marks
    episode ends (terminated or truncated), after which the return restarts.

    Returns the new scaler and ``clip(r / sqrt(var(G) + eps), ±clip)``
    ``[T, B]``.
    """

    def step(scaler, inputs):
        r, d = inputs
        returns = scaler.returns * gamma + r
        stats = update(scaler.stats, returns)
        scaled = jnp.clip(r / jnp.sqrt(stats.var + eps), -clip, clip)
        return RewardScaler(jnp.where(d, 0.0, returns), stats), scaled

    return jax.lax.scan(step, scaler, (reward.astype(jnp.float32), done))


class LeafStats(NamedTuple):
    """Statistics of a pytree observation, one entry per leaf (in
    ``jax.tree.leaves`` order): ``RunningStats`` for a float leaf, ``()``
    for a leaf left as it is."""

    leaves: tuple


class Normalizer(NamedTuple):
    """A learner's normalisation state: ``obs`` stats (``()`` when off) and
    the reward scaler (``()`` when off)."""

    obs: RunningStats | LeafStats | tuple
    reward: RewardScaler | tuple


def _obs_stats(obs_spec: Any) -> RunningStats | LeafStats:
    """``RunningStats`` for one float array (a shape or one
    ``ShapeDtypeStruct``), else ``LeafStats`` of the pytree's leaves."""
    if isinstance(obs_spec, tuple) and all(isinstance(n, int) for n in obs_spec):
        return init_stats(obs_spec)
    leaves = jax.tree.leaves(obs_spec)
    floats = [jnp.issubdtype(leaf.dtype, jnp.floating) for leaf in leaves]
    if isinstance(obs_spec, jax.ShapeDtypeStruct) and floats[0]:
        return init_stats(tuple(obs_spec.shape))
    return LeafStats(
        tuple(
            init_stats(tuple(leaf.shape)) if is_float else ()
            for leaf, is_float in zip(leaves, floats, strict=True)
        )
    )


def init_normalizer(
    obs_spec: Any, num_envs: int, obs: bool, rewards: bool
) -> Normalizer:
    """The state for the switched-on parts; ``Normalizer((), ())`` (no leaves)
    when both are off, so disabled runs carry nothing new. ``obs_spec``: the
    observation's shape, or its pytree of ``jax.ShapeDtypeStruct``."""
    return Normalizer(
        _obs_stats(obs_spec) if obs else (),
        init_reward_scaler(num_envs) if rewards else (),
    )


def _per_leaf(stats: LeafStats, fn: Callable, obs: Any) -> Any:
    """``fn(stats, leaf)`` on each float leaf of ``obs``; the other leaves
    as they are."""
    leaves, tree = jax.tree.flatten(obs)
    out = [
        fn(s, x) if isinstance(s, RunningStats) else x
        for s, x in zip(stats.leaves, leaves, strict=True)
    ]
    return jax.tree.unflatten(tree, out)


def normalize_obs(norm: Normalizer, obs: Any) -> Any:
    """``obs`` ``[..., *obs_shape]`` (or a pytree of such leaves)
    standardised if observation normalisation is on, else unchanged."""
    if isinstance(norm.obs, RunningStats):
        return normalize(norm.obs, obs)
    if isinstance(norm.obs, LeafStats):
        return _per_leaf(norm.obs, normalize, obs)
    return obs


def update_obs_stats(stats: RunningStats | LeafStats, obs: Any) -> Any:
    """``stats`` with the batch ``obs`` merged in (leaf by leaf for a
    pytree)."""
    if isinstance(stats, RunningStats):
        return update(stats, obs)
    leaves, _ = jax.tree.flatten(obs)
    return LeafStats(
        tuple(
            update(s, x) if isinstance(s, RunningStats) else s
            for s, x in zip(stats.leaves, leaves, strict=True)
        )
    )


def normalize_rollout(norm: Normalizer, traj, gamma: jax.Array):
    """A ``[T, B]`` ``Transition`` as the learner sees it, and the new state.

    ``obs``/``final_obs`` are standardised with the statistics the rollout
    acted with (so an on-policy learner's log-probabilities match), then the
    statistics take in ``traj.obs`` for the next rollout; rewards are scaled
    by ``scale_rewards``. Returns ``(norm, traj)``.
    """
    obs_stats, scaler = norm
    if isinstance(obs_stats, RunningStats | LeafStats):
        raw = traj.obs
        traj = traj._replace(
            obs=normalize_obs(norm, raw),
            final_obs=normalize_obs(norm, traj.final_obs),
        )
        obs_stats = update_obs_stats(obs_stats, raw)
    if isinstance(scaler, RewardScaler):
        done = jnp.logical_or(traj.terminated, traj.truncated)
        scaler, reward = scale_rewards(scaler, traj.reward, done, gamma)
        traj = traj._replace(reward=reward)
    return Normalizer(obs_stats, scaler), traj
