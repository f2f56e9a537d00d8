"""MountainCarContinuous-v0, ported from gymnasium's
``classic_control/continuous_mountain_car.py``."""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.env.spaces import Box
from ondevice_rl.envs.mountain_car import MountainCar, drive
from ondevice_rl.ranges import NON_NEGATIVE, POSITIVE


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


class MountainCarContinuous(MountainCar):
    """Drive an underpowered car up a hill with a continuous engine force.

    Action ``[1]`` float in ``[min_action, max_action]`` (clipped to it for the
    dynamics; the energy cost uses the unclipped value, as gymnasium).
    Observation ``[2]``: position, velocity. Reward ``-0.1 * action**2`` per
    step, plus 100 on the terminal step (``position >= 0.45`` and ``velocity
    >= 0``). The car starts at rest at a position uniform in ``[-0.6, -0.4]``.
    Reset, observation and hill dynamics are ``MountainCar``'s.
    """

    name = "MountainCarContinuous-v0"
    PARAM_RANGES = {
        "gravity": NON_NEGATIVE,
        "action_cost": NON_NEGATIVE,
        "max_speed": POSITIVE,
        "power": POSITIVE,
    }

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

    def transition(self, key, state, action, params):
        p = params
        a = jnp.asarray(action, jnp.float32).reshape(-1)[0]
        force = jnp.clip(a, p.min_action, p.max_action)
        new, terminated = drive(state, force * p.power, p)
        reward = jnp.where(terminated, p.goal_reward, 0.0) - p.action_cost * a**2
        return new, reward, terminated

    def action_space(self, params):
        return Box(params.min_action, params.max_action, (1,), jnp.float32)
