"""CartPole-v1, ported from gymnasium's ``classic_control/cartpole.py``."""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.env.spaces import Box, Discrete
from ondevice_rl.env.types import Environment
from ondevice_rl.ranges import NON_NEGATIVE, POSITIVE


class CartPoleParams(NamedTuple):
    gravity: jax.Array
    masscart: jax.Array
    masspole: jax.Array
    length: jax.Array  # half the pole's length
    force_mag: jax.Array
    tau: jax.Array
    theta_threshold_radians: jax.Array
    x_threshold: jax.Array
    max_steps: jax.Array


class CartPoleState(NamedTuple):
    x: jax.Array
    x_dot: jax.Array
    theta: jax.Array
    theta_dot: jax.Array
    time: jax.Array


class CartPole(Environment):
    """Balance a pole on a cart; +1 reward per step, 2 actions (push left/right).

    Observation ``[4]``: cart position, cart velocity, pole angle, pole angular
    velocity. Euler integration, as gymnasium's default.
    """

    name = "CartPole-v1"
    PARAM_RANGES = {
        "gravity": NON_NEGATIVE,
        **dict.fromkeys(
            ("masscart", "masspole", "length", "force_mag", "tau"), POSITIVE
        ),
        **dict.fromkeys(("theta_threshold_radians", "x_threshold"), POSITIVE),
    }

    def default_params(self) -> CartPoleParams:
        f = jnp.float32
        return CartPoleParams(
            gravity=f(9.8),
            masscart=f(1.0),
            masspole=f(0.1),
            length=f(0.5),
            force_mag=f(10.0),
            tau=f(0.02),
            theta_threshold_radians=f(12 * 2 * 3.141592653589793 / 360),
            x_threshold=f(2.4),
            max_steps=jnp.int32(500),
        )

    def reset(self, key, params):
        x, x_dot, theta, theta_dot = jax.random.uniform(
            key, (4,), jnp.float32, -0.05, 0.05
        )
        state = CartPoleState(x, x_dot, theta, theta_dot, jnp.int32(0))
        return self.observe(state, params), state

    def transition(self, key, state, action, params):
        p = params
        force = jnp.where(action == 1, p.force_mag, -p.force_mag)
        total_mass = p.masspole + p.masscart
        polemass_length = p.masspole * p.length
        cos, sin = jnp.cos(state.theta), jnp.sin(state.theta)
        temp = (force + polemass_length * state.theta_dot**2 * sin) / total_mass
        theta_acc = (p.gravity * sin - cos * temp) / (
            p.length * (4.0 / 3.0 - p.masspole * cos**2 / total_mass)
        )
        x_acc = temp - polemass_length * theta_acc * cos / total_mass
        new = CartPoleState(
            x=state.x + p.tau * state.x_dot,
            x_dot=state.x_dot + p.tau * x_acc,
            theta=state.theta + p.tau * state.theta_dot,
            theta_dot=state.theta_dot + p.tau * theta_acc,
            time=state.time,
        )
        terminated = (jnp.abs(new.x) > p.x_threshold) | (
            jnp.abs(new.theta) > p.theta_threshold_radians
        )
        return new, jnp.float32(1.0), terminated

    def observe(self, state, params):
        return jnp.stack([state.x, state.x_dot, state.theta, state.theta_dot])

    def observation_space(self, params):
        inf = jnp.finfo(jnp.float32).max
        high = jnp.array(
            [params.x_threshold * 2, inf, params.theta_threshold_radians * 2, inf],
            jnp.float32,
        )
        return Box(-high, high, (4,), jnp.float32)

    def action_space(self, params):
        return Discrete(2)
