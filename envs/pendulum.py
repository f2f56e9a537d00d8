"""Pendulum-v1, ported from gymnasium's ``classic_control/pendulum.py``."""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.env.spaces import Box
from ondevice_rl.env.types import Environment
from ondevice_rl.ranges import NON_NEGATIVE, POSITIVE

_PI = 3.141592653589793


class PendulumParams(NamedTuple):
    max_speed: jax.Array
    max_torque: jax.Array
    dt: jax.Array
    gravity: jax.Array
    mass: jax.Array
    length: jax.Array
    max_steps: jax.Array


class PendulumState(NamedTuple):
    theta: jax.Array  # [] angle, 0 = upright; not wrapped
    theta_dot: jax.Array
    time: jax.Array


def angle_normalize(x: jax.Array) -> jax.Array:
    """Maps an angle to ``[-pi, pi)``."""
    return jnp.mod(x + _PI, 2 * _PI) - _PI


class Pendulum(Environment):
    """Swing a pendulum up and hold it upright; never terminates.

    Action ``[1]`` torque, clipped to ``[-max_torque, max_torque]``.
    Observation ``[3]``: ``cos(theta), sin(theta), theta_dot``. Reward
    ``-(angle**2 + 0.1 * theta_dot**2 + 0.001 * torque**2)`` of the state
    before the step and the clipped torque, with the angle normalised to
    ``[-pi, pi)``. The initial angle is uniform in ``[-pi, pi]`` and the
    angular velocity uniform in ``[-1, 1]``.
    """

    name = "Pendulum-v1"
    PARAM_RANGES = {
        "gravity": NON_NEGATIVE,
        **dict.fromkeys(("max_speed", "max_torque", "dt", "mass", "length"), POSITIVE),
    }

    def default_params(self) -> PendulumParams:
        f = jnp.float32
        return PendulumParams(
            max_speed=f(8.0),
            max_torque=f(2.0),
            dt=f(0.05),
            gravity=f(10.0),
            mass=f(1.0),
            length=f(1.0),
            max_steps=jnp.int32(200),
        )

    def reset(self, key, params):
        high = jnp.array([_PI, 1.0], jnp.float32)
        theta, theta_dot = jax.random.uniform(key, (2,), jnp.float32, -high, high)
        state = PendulumState(theta, theta_dot, jnp.int32(0))
        return self.observe(state, params), state

    def transition(self, key, state, action, params):
        p = params
        u = jnp.asarray(action, jnp.float32).reshape(-1)[0]
        u = jnp.clip(u, -p.max_torque, p.max_torque)
        th, thdot = state.theta, state.theta_dot
        costs = angle_normalize(th) ** 2 + 0.1 * thdot**2 + 0.001 * u**2
        thdot_acc = (
            3 * p.gravity / (2 * p.length) * jnp.sin(th)
            + 3.0 / (p.mass * p.length**2) * u
        )
        new_thdot = jnp.clip(thdot + thdot_acc * p.dt, -p.max_speed, p.max_speed)
        new = PendulumState(th + new_thdot * p.dt, new_thdot, state.time)
        return new, -costs, jnp.bool_(False)

    def observe(self, state, params):
        return jnp.stack([jnp.cos(state.theta), jnp.sin(state.theta), state.theta_dot])

    def observation_space(self, params):
        one = jnp.float32(1.0)
        high = jnp.stack([one, one, params.max_speed])
        return Box(-high, high, (3,), jnp.float32)

    def action_space(self, params):
        return Box(-params.max_torque, params.max_torque, (1,), jnp.float32)
