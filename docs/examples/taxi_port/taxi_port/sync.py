"""What ``ondevice-rl check-env --reference ... --sync ...`` needs to compare
the port with gymnasium's Taxi-v4 step by step.

* ``reference()``: gymnasium's Taxi-v4, its two stochastic options off, its
  observations one-hot like the port's;
* ``sync_taxi(reference_env, state)``: sets it to the port's state (and its
  time limit's step count) and returns its observation of that state.
"""

from typing import Any

import gymnasium
import numpy as np
from gymnasium.wrappers import TransformObservation

from ondevice_rl.envs.gymnasium_sync import set_elapsed_steps

NUM_STATES = 500


def one_hot(index: int) -> np.ndarray:
    """gymnasium's state index → the port's observation ``[500]`` float32."""
    out = np.zeros(NUM_STATES, np.float32)
    out[int(index)] = 1.0
    return out


def reference() -> gymnasium.Env:
    """gymnasium's Taxi-v4 with one-hot observations (``is_rainy`` and
    ``fickle_passenger`` draw from the env's own RNG in ``step``: no state
    sync could match them, so they stay off, as by default)."""
    env = gymnasium.make("Taxi-v4", is_rainy=False, fickle_passenger=False)
    space = gymnasium.spaces.Box(0.0, 1.0, (NUM_STATES,), np.float32)
    return TransformObservation(env, one_hot, space)


def sync_taxi(reference_env: Any, state: Any) -> np.ndarray:
    """Sets gymnasium's Taxi to the port's ``state``; returns its observation."""
    taxi = reference_env.unwrapped
    taxi.s = int(
        taxi.encode(
            int(state.row), int(state.col), int(state.passenger), int(state.destination)
        )
    )
    taxi.lastaction = None
    set_elapsed_steps(reference_env, int(state.time))
    return one_hot(taxi.s)
