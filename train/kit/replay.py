"""What the replay learners (DQN, SAC, TD3) share around the device replay
buffer (``ondevice_rl.replay``): the empty buffer, the config's sizes and
their checks; their update is ``train/kit/replay_loop.py``."""

from typing import Any

import jax.numpy as jnp

from ondevice_rl.ranges import MAX_INT
from ondevice_rl.replay import ReplayBuffer
from ondevice_rl.rollout import Transition
from ondevice_rl.train.kit.env_setup import EnvSetup, zero_observation


def empty_buffer(setup: EnvSetup, num_envs: int, capacity: int) -> ReplayBuffer:
    """A buffer of ``capacity`` vector steps of ``num_envs`` transitions
    (leaves ``[C, B, ...]``): observations in their own dtypes (an action
    mask included), actions int32 (discrete) or float32 ``[A]`` (Box), no
    extras."""
    obs = zero_observation(setup, (num_envs,))
    flags = jnp.zeros((num_envs,), jnp.bool_)
    if setup.continuous:
        action = jnp.zeros((num_envs, setup.action_dim), jnp.float32)
    else:
        action = jnp.zeros((num_envs,), jnp.int32)
    example = Transition(
        obs=obs,
        action=action,
        reward=jnp.zeros((num_envs,), jnp.float32),
        terminated=flags,
        truncated=flags,
        final_obs=obs,
        extras=(),
    )
    return ReplayBuffer.create(example, capacity)


class ReplaySizes:
    """Sizes of a learner that learns from a replay buffer of
    ``buffer_size`` transitions in batches of ``batch_size`` (mix into the
    config, which defines ``vector_steps``: vector steps of ``num_envs``
    envs per update)."""

    @property
    def buffer_capacity(self) -> int:
        """Vector steps the buffer holds (its time rows)."""
        return self.buffer_size // self.num_envs

    @property
    def steps_per_update(self) -> int:
        return self.vector_steps * self.num_envs

    @property
    def num_updates(self) -> int:
        return self.total_timesteps // self.steps_per_update

    @property
    def learn_batch_size(self) -> int:
        return self.batch_size


def check_replay_sizes(config: Any, needed: int, needed_by: str) -> None:
    """One-line ValueErrors for replay settings that cannot work: a negative
    ``config.learning_starts``, a buffer smaller than one batch, or one
    holding fewer than ``needed`` vector steps (``config.buffer_capacity``;
    ``needed_by`` names the fields that need them)."""
    name = type(config).__name__
    starts = config.learning_starts
    if isinstance(starts, bool) or not isinstance(starts, int) or starts < 0:
        raise ValueError(
            f"{name}.learning_starts must be a non-negative int, got {starts!r}"
        )
    if starts >= MAX_INT:  # an int32 step count
        raise ValueError(f"{name}.learning_starts={starts} is too large (< 2^31)")
    if config.buffer_size < config.batch_size:
        raise ValueError(
            f"{name}: buffer_size={config.buffer_size} is less than "
            f"batch_size={config.batch_size}"
        )
    if config.buffer_capacity < needed:
        raise ValueError(
            f"{name}: buffer_size={config.buffer_size} holds "
            f"{config.buffer_capacity} vector steps of num_envs={config.num_envs}; "
            f"needs at least {needed} ({needed_by})"
        )
