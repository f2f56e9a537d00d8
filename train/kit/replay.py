"""What the off-policy learners share around the device replay buffer
(``ondevice_rl.replay``)."""

import jax
import jax.numpy as jnp

from ondevice_rl.replay import ReplayBuffer
from ondevice_rl.rollout import Transition
from ondevice_rl.train.kit.env_setup import EnvSetup


def empty_buffer(setup: EnvSetup, num_envs: int, capacity: int) -> ReplayBuffer:
    """A buffer of ``capacity`` vector steps of ``num_envs`` transitions
    (leaves ``[C, B, ...]``): observations float32, actions int32 (discrete)
    or float32 ``[A]`` (Box), no extras."""
    obs = jnp.zeros((num_envs,) + setup.obs_shape, jnp.float32)
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


def crossed(before: jax.Array, after: jax.Array, every: int) -> jax.Array:
    """Whether a count going from ``before`` to ``after`` passed a multiple of
    ``every`` (e.g. env steps past a target-update boundary)."""
    return after // every > before // every
