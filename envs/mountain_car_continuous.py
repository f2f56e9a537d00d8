"""MountainCarContinuous-v0, ported from gymnasium's
``classic_control/continuous_mountain_car.py``."""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.spaces import Box
from ondevice_rl.types import Environment

from .mountain_car import MountainCarState


class MountainCarContinuousParams(NamedTuple):
    min_action: jax.Array
    max_action: jax.Array
    min_position: jax.Array
    max_position: jax.Array
    max_speed: jax.Array
    goal_position: jax.Array
    goal_velocity: jax.Array
    power: jax.Array
    gravity: jax.Array
    goal_reward: jax.Array  # reward added on the terminal step
    action_cost: jax.Array  # reward -= action_cost * action**2 each step
    max_steps: jax.Array


class MountainCarContinuous(Environment):
    """Drive an underpowered car up a hill with a continuous engine force.

    Action ``[1]`` float in ``[min_action, max_action]`` (clipped to it for the
    dynamics; the energy cost uses the unclipped value, as gymnasium).
    Observation ``[2]``: position, velocity. Reward ``-0.1 * action**2`` per
    step, plus 100 on the terminal step (``position >= 0.45`` and ``velocity
    >= 0``). The car starts at rest at a position uniform in ``[-0.6, -0.4]``.
    """

    name = "MountainCarContinuous-v0"

    def default_params(self) -> MountainCarContinuousParams:
        f = jnp.float32
        return MountainCarContinuousParams(
            min_action=f(-1.0),
            max_action=f(1.0),
            min_position=f(-1.2),
            max_position=f(0.6),
            max_speed=f(0.07),
            goal_position=f(0.45),
            goal_velocity=f(0.0),
            power=f(0.0015),
            gravity=f(0.0025),
            goal_reward=f(100.0),
            action_cost=f(0.1),
            max_steps=jnp.int32(999),
        )

    def reset(self, key, params):
        position = jax.random.uniform(key, (), jnp.float32, -0.6, -0.4)
        state = MountainCarState(position, jnp.float32(0.0), jnp.int32(0))
        return self.observe(state, params), state

    def transition(self, key, state, action, params):
        p = params
        a = jnp.asarray(action, jnp.float32).reshape(-1)[0]
        force = jnp.clip(a, p.min_action, p.max_action)
        velocity = (
            state.velocity + force * p.power - p.gravity * jnp.cos(3 * state.position)
        )
        velocity = jnp.clip(velocity, -p.max_speed, p.max_speed)
        position = jnp.clip(state.position + velocity, p.min_position, p.max_position)
        at_wall = (position == p.min_position) & (velocity < 0)
        velocity = jnp.where(at_wall, 0.0, velocity)
        terminated = (position >= p.goal_position) & (velocity >= p.goal_velocity)
        reward = jnp.where(terminated, p.goal_reward, 0.0) - p.action_cost * a**2
        new = MountainCarState(position, velocity, state.time)
        return new, reward, terminated

    def observe(self, state, params):
        return jnp.stack([state.position, state.velocity])

    def observation_space(self, params):
        low = jnp.stack([params.min_position, -params.max_speed])
        high = jnp.stack([params.max_position, params.max_speed])
        return Box(low, high, (2,), jnp.float32)

    def action_space(self, params):
        return Box(params.min_action, params.max_action, (1,), jnp.float32)
