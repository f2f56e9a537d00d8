"""Acrobot-v1, ported from gymnasium's ``classic_control/acrobot.py``.

Sutton and Barto's "book" dynamics, one fourth-order Runge-Kutta step of
``dt`` per environment step, as gymnasium's default.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.env.spaces import Box, Discrete
from ondevice_rl.env.types import Environment
from ondevice_rl.ranges import NON_NEGATIVE, POSITIVE

_PI = 3.141592653589793


class AcrobotParams(NamedTuple):
    dt: jax.Array
    gravity: jax.Array
    link_length_1: jax.Array  # only the first link's length enters the dynamics
    link_mass_1: jax.Array
    link_mass_2: jax.Array
    link_com_pos_1: jax.Array  # position of each link's centre of mass
    link_com_pos_2: jax.Array
    link_moi: jax.Array  # moment of inertia of both links
    max_vel_1: jax.Array
    max_vel_2: jax.Array
    torque: jax.Array  # magnitude of the torque of actions 0 and 2
    torque_noise_max: jax.Array  # uniform torque noise; see ``Acrobot``
    max_steps: jax.Array


class AcrobotState(NamedTuple):
    theta1: jax.Array  # [] angle of the first link, 0 = hanging down
    theta2: jax.Array  # [] angle of the second link relative to the first
    dtheta1: jax.Array
    dtheta2: jax.Array
    time: jax.Array


def _wrap(x: jax.Array, low: float, high: float) -> jax.Array:
    """Wraps ``x`` into ``[low, high)`` (gymnasium keeps ``high`` itself; the
    angle is only ever seen through sin/cos, so either end is the same)."""
    return jnp.mod(x - low, high - low) + low


def _derivatives(y: jax.Array, torque: jax.Array, p: AcrobotParams) -> jax.Array:
    """``[4]`` time derivative of ``y = [theta1, theta2, dtheta1, dtheta2]``."""
    theta1, theta2, dtheta1, dtheta2 = y
    m1, m2 = p.link_mass_1, p.link_mass_2
    l1, lc1, lc2 = p.link_length_1, p.link_com_pos_1, p.link_com_pos_2
    i1 = i2 = p.link_moi
    g = p.gravity
    cos2, sin2 = jnp.cos(theta2), jnp.sin(theta2)
    d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * cos2) + i1 + i2
    d2 = m2 * (lc2**2 + l1 * lc2 * cos2) + i2
    phi2 = m2 * lc2 * g * jnp.cos(theta1 + theta2 - _PI / 2.0)
    phi1 = (
        -m2 * l1 * lc2 * dtheta2**2 * sin2
        - 2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * sin2
        + (m1 * lc1 + m2 * l1) * g * jnp.cos(theta1 - _PI / 2.0)
        + phi2
    )
    ddtheta2 = (torque + d2 / d1 * phi1 - m2 * l1 * lc2 * dtheta1**2 * sin2 - phi2) / (
        m2 * lc2**2 + i2 - d2**2 / d1
    )
    ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
    return jnp.stack([dtheta1, dtheta2, ddtheta1, ddtheta2])


def _rk4(y: jax.Array, torque: jax.Array, p: AcrobotParams) -> jax.Array:
    """One classic Runge-Kutta step of length ``p.dt``; ``y`` is ``[4]``."""
    half = p.dt / 2.0
    k1 = _derivatives(y, torque, p)
    k2 = _derivatives(y + half * k1, torque, p)
    k3 = _derivatives(y + half * k2, torque, p)
    k4 = _derivatives(y + p.dt * k3, torque, p)
    return y + p.dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)


class Acrobot(Environment):
    """Swing the tip of a two-link chain above a line; 3 actions (torque -1/0/+1).

    Observation ``[6]``: ``cos(theta1), sin(theta1), cos(theta2), sin(theta2),
    dtheta1, dtheta2``. Reward -1 per step and 0 on the terminal step, which is
    reached when ``-cos(theta1) - cos(theta1 + theta2) > 1``. The initial state
    is uniform in ``[-0.1, 0.1]^4``.

    ``params.torque_noise_max`` (0 by default, as gymnasium) adds uniform noise
    to the torque, drawn from the step key. Construct with
    ``Acrobot(stochastic_step=True)`` when it is non-zero, so that wrappers
    split the key instead of reusing it for resets.
    """

    name = "Acrobot-v1"
    PARAM_RANGES = {
        **dict.fromkeys(("gravity", "torque", "torque_noise_max"), NON_NEGATIVE),
        **dict.fromkeys(
            ("dt", "link_length_1", "link_mass_1", "link_mass_2", "link_moi"), POSITIVE
        ),
        **dict.fromkeys(
            ("link_com_pos_1", "link_com_pos_2", "max_vel_1", "max_vel_2"), POSITIVE
        ),
    }

    def __init__(self, stochastic_step: bool = False):
        self.stochastic_step = stochastic_step

    def default_params(self) -> AcrobotParams:
        f = jnp.float32
        return AcrobotParams(
            dt=f(0.2),
            gravity=f(9.8),
            link_length_1=f(1.0),
            link_mass_1=f(1.0),
            link_mass_2=f(1.0),
            link_com_pos_1=f(0.5),
            link_com_pos_2=f(0.5),
            link_moi=f(1.0),
            max_vel_1=f(4 * _PI),
            max_vel_2=f(9 * _PI),
            torque=f(1.0),
            torque_noise_max=f(0.0),
            max_steps=jnp.int32(500),
        )

    def reset(self, key, params):
        theta1, theta2, dtheta1, dtheta2 = jax.random.uniform(
            key, (4,), jnp.float32, -0.1, 0.1
        )
        state = AcrobotState(theta1, theta2, dtheta1, dtheta2, jnp.int32(0))
        return self.observe(state, params), state

    def transition(self, key, state, action, params):
        p = params
        noise = jax.random.uniform(
            key, (), jnp.float32, -p.torque_noise_max, p.torque_noise_max
        )
        torque = (jnp.asarray(action, jnp.float32) - 1.0) * p.torque + noise
        y = jnp.stack([state.theta1, state.theta2, state.dtheta1, state.dtheta2])
        theta1, theta2, dtheta1, dtheta2 = _rk4(y, torque, p)
        new = AcrobotState(
            theta1=_wrap(theta1, -_PI, _PI),
            theta2=_wrap(theta2, -_PI, _PI),
            dtheta1=jnp.clip(dtheta1, -p.max_vel_1, p.max_vel_1),
            dtheta2=jnp.clip(dtheta2, -p.max_vel_2, p.max_vel_2),
            time=state.time,
        )
        terminated = -jnp.cos(new.theta1) - jnp.cos(new.theta2 + new.theta1) > 1.0
        reward = jnp.where(terminated, 0.0, -1.0).astype(jnp.float32)
        return new, reward, terminated

    def observe(self, state, params):
        return jnp.stack(
            [
                jnp.cos(state.theta1),
                jnp.sin(state.theta1),
                jnp.cos(state.theta2),
                jnp.sin(state.theta2),
                state.dtheta1,
                state.dtheta2,
            ]
        )

    def observation_space(self, params):
        one = jnp.float32(1.0)
        high = jnp.stack([one, one, one, one, params.max_vel_1, params.max_vel_2])
        return Box(-high, high, (6,), jnp.float32)

    def action_space(self, params):
        return Discrete(3)
