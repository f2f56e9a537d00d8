"""MountainCar-v0, ported from gymnasium's ``classic_control/mountain_car.py``."""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.env.spaces import Box, Discrete
from ondevice_rl.env.types import Environment
from ondevice_rl.ranges import NON_NEGATIVE, POSITIVE


class MountainCarParams(NamedTuple):
    min_position: jax.Array
    max_position: jax.Array
    max_speed: jax.Array
    goal_position: jax.Array
    goal_velocity: jax.Array
    force: jax.Array
    gravity: jax.Array
    max_steps: jax.Array


class MountainCarState(NamedTuple):
    position: jax.Array
    velocity: jax.Array
    time: jax.Array


def drive(state: MountainCarState, acceleration: jax.Array, params):
    """Shared hill dynamics of both mountain cars: ``(state, terminated)``.

    ``params`` needs ``gravity``, ``max_speed``, ``min_position``,
    ``max_position``, ``goal_position`` and ``goal_velocity``.
    """
    p = params
    velocity = state.velocity + acceleration - jnp.cos(3 * state.position) * p.gravity
    velocity = jnp.clip(velocity, -p.max_speed, p.max_speed)
    position = jnp.clip(state.position + velocity, p.min_position, p.max_position)
    at_wall = (position == p.min_position) & (velocity < 0)
    velocity = jnp.where(at_wall, 0.0, velocity)
    terminated = (position >= p.goal_position) & (velocity >= p.goal_velocity)
    return MountainCarState(position, velocity, state.time), terminated


class MountainCar(Environment):
    """Drive an underpowered car up a hill; 3 actions (push left, none, right).

    Observation ``[2]``: position, velocity. Reward -1 per step; the episode
    terminates when ``position >= goal_position`` and ``velocity >=
    goal_velocity``. The car starts at rest at a position uniform in
    ``[-0.6, -0.4]``; hitting the left wall zeroes a leftward velocity.
    """

    name = "MountainCar-v0"
    PARAM_RANGES = {
        "gravity": NON_NEGATIVE,
        "max_speed": POSITIVE,
        "force": POSITIVE,
    }

    def default_params(self) -> MountainCarParams:
        f = jnp.float32
        return MountainCarParams(
            min_position=f(-1.2),
            max_position=f(0.6),
            max_speed=f(0.07),
            goal_position=f(0.5),
            goal_velocity=f(0.0),
            force=f(0.001),
            gravity=f(0.0025),
            max_steps=jnp.int32(200),
        )

    def reset(self, key, params):
        position = jax.random.uniform(key, (), jnp.float32, -0.6, -0.4)
        state = MountainCarState(position, jnp.float32(0.0), jnp.int32(0))
        return self.observe(state, params), state

    def transition(self, key, state, action, params):
        push = jnp.asarray(action, jnp.float32) - 1.0
        new, terminated = drive(state, push * params.force, params)
        return new, jnp.float32(-1.0), terminated

    def observe(self, state, params):
        return jnp.stack([state.position, state.velocity])

    def observation_space(self, params):
        low = jnp.stack([params.min_position, -params.max_speed])
        high = jnp.stack([params.max_position, params.max_speed])
        return Box(low, high, (2,), jnp.float32)

    def action_space(self, params):
        return Discrete(3)
