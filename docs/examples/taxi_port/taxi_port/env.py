"""gymnasium's Taxi-v4 (``gymnasium/envs/toy_text/taxi.py``) in JAX.

A taxi on a 5×5 grid with walls picks a passenger up at one of four stands
(R, G, Y, B) and drops them at another. Actions: 0 south, 1 north, 2 east,
3 west, 4 pick up, 5 drop off. Rewards: -1 a step, +20 for the delivery
(which ends the episode), -10 for a pick-up or drop-off where none is
possible. A time limit of 200 steps truncates.

The port keeps gymnasium's dynamics exactly (its default ``is_rainy=False``
and ``fickle_passenger=False``: deterministic steps) and its reset
distribution (uniform over the 300 states with the passenger at a stand
other than the destination). One change: the observation is the one-hot
vector ``[500]`` float32 of gymnasium's state index, what a network can
learn from; ``sync.reference`` wraps gymnasium's env the same way.

    env, params = ondevice_rl.make("taxi_port.env:make_taxi")
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl import Box, Discrete, Environment

MAP = (
    "+---------+",
    "|R: | : :G|",
    "| : | : : |",
    "| : : : : |",
    "| | : | : |",
    "|Y| : |B: |",
    "+---------+",
)
#: The stands' (row, column): R, G, Y, B.
STANDS = np.array([(0, 0), (0, 4), (4, 0), (4, 3)], np.int32)
IN_TAXI = 4  # the passenger's location while riding
NUM_STATES = 500  # 25 taxi cells × 5 passenger locations × 4 destinations
# Where the map has no wall between a cell and its east/west neighbour (the
# map is a constant: NumPy here is fine, it is not randomness).
_CHARS = np.array([list(row) for row in MAP])
CAN_EAST = _CHARS[1:6, 2:11:2] == ":"  # [5, 5]
CAN_WEST = _CHARS[1:6, 0:10:2] == ":"  # [5, 5]


class TaxiParams(NamedTuple):
    max_steps: jax.Array  # [] int32, the time limit


class TaxiState(NamedTuple):
    row: jax.Array  # [] int32, 0..4
    col: jax.Array  # [] int32, 0..4
    passenger: jax.Array  # [] int32, a stand 0..3 or IN_TAXI
    destination: jax.Array  # [] int32, a stand 0..3
    time: jax.Array  # [] int32, steps taken this episode


def encode(state: TaxiState) -> jax.Array:
    """gymnasium's state index ``((row * 5 + col) * 5 + passenger) * 4 +
    destination``, ``[]`` int32."""
    return ((state.row * 5 + state.col) * 5 + state.passenger) * 4 + state.destination


class Taxi(Environment):
    """Taxi-v4; observation ``[500]`` one-hot float32, ``Discrete(6)`` actions."""

    name = "taxi_port/Taxi-v4"

    def default_params(self) -> TaxiParams:
        return TaxiParams(max_steps=jnp.int32(200))

    def reset(self, key, params):
        # Uniform over gymnasium's 300 start states: any cell, the passenger
        # at a stand, the destination one of the three other stands.
        k_row, k_col, k_passenger, k_offset = jax.random.split(key, 4)
        passenger = jax.random.randint(k_passenger, (), 0, 4, jnp.int32)
        offset = jax.random.randint(k_offset, (), 1, 4, jnp.int32)
        state = TaxiState(
            row=jax.random.randint(k_row, (), 0, 5, jnp.int32),
            col=jax.random.randint(k_col, (), 0, 5, jnp.int32),
            passenger=passenger,
            destination=(passenger + offset) % 4,
            time=jnp.int32(0),
        )
        return self.observe(state, params), state

    def transition(self, key, state, action, params):
        # No Python `if` on traced values: every branch is computed and
        # selected with jnp.where.
        row, col = state.row, state.col
        east = (action == 2) & jnp.asarray(CAN_EAST)[row, col]
        west = (action == 3) & jnp.asarray(CAN_WEST)[row, col]
        new_row = jnp.where(action == 0, jnp.minimum(row + 1, 4), row)
        new_row = jnp.where(action == 1, jnp.maximum(row - 1, 0), new_row)
        new_col = jnp.where(east, col + 1, jnp.where(west, col - 1, col))
        # The stand the taxi is at, or -1.
        here = (jnp.asarray(STANDS) == jnp.stack([row, col])).all(axis=1)
        stand = jnp.where(here.any(), jnp.argmax(here), -1).astype(jnp.int32)
        riding = state.passenger == IN_TAXI
        pick_up = (action == 4) & ~riding & (stand == state.passenger)
        deliver = (action == 5) & riding & (stand == state.destination)
        drop_elsewhere = (action == 5) & riding & (stand >= 0) & ~deliver
        illegal = ((action == 4) & ~pick_up) | ((action == 5) & ~riding)
        illegal = illegal | ((action == 5) & riding & (stand < 0))
        passenger = jnp.where(pick_up, IN_TAXI, state.passenger)
        passenger = jnp.where(deliver, state.destination, passenger)
        passenger = jnp.where(drop_elsewhere, stand, passenger)
        reward = jnp.where(deliver, 20.0, jnp.where(illegal, -10.0, -1.0))
        new = TaxiState(new_row, new_col, passenger, state.destination, state.time)
        return new, reward.astype(jnp.float32), deliver

    def observe(self, state, params):
        return jax.nn.one_hot(encode(state), NUM_STATES, dtype=jnp.float32)

    def observation_space(self, params):
        return Box(0.0, 1.0, (NUM_STATES,), jnp.float32)

    def action_space(self, params):
        return Discrete(6)


def make_taxi() -> Taxi:
    """The entry point: ``"taxi_port.env:make_taxi"``."""
    return Taxi()
