"""``sync_state`` functions for gymnasium's classic-control environments.

Each sets the unwrapped gymnasium env to a port's state (in gymnasium's own
dtype for that env) and its ``TimeLimit`` to the port's step count, and
returns gymnasium's observation of that state: pass one as ``sync_state``
to ``ondevice_rl.checks.reference.check_conformance``. Imports no port.
"""

from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium.wrappers import TimeLimit


def set_elapsed_steps(reference_env: Any, steps: int) -> None:
    """Sets the step count of the ``TimeLimit`` wrapper(s) around the env."""
    env = reference_env
    while env is not None:
        if isinstance(env, TimeLimit):
            env._elapsed_steps = int(steps)
        env = getattr(env, "env", None)


def _floats(*xs: Any, dtype: Any = np.float64) -> np.ndarray:
    return np.array([float(x) for x in xs], dtype)


def sync_cartpole(reference_env: Any, state: Any) -> np.ndarray:
    u = reference_env.unwrapped
    u.state = _floats(state.x, state.x_dot, state.theta, state.theta_dot)
    u.steps_beyond_terminated = None
    set_elapsed_steps(reference_env, state.time)
    return np.array(u.state, np.float32)


def sync_acrobot(reference_env: Any, state: Any) -> np.ndarray:
    u = reference_env.unwrapped
    u.state = _floats(state.theta1, state.theta2, state.dtheta1, state.dtheta2)
    set_elapsed_steps(reference_env, state.time)
    return u._get_ob()


def sync_mountain_car(reference_env: Any, state: Any) -> np.ndarray:
    u = reference_env.unwrapped
    u.state = _floats(state.position, state.velocity)
    set_elapsed_steps(reference_env, state.time)
    return np.array(u.state, np.float32)


def sync_mountain_car_continuous(reference_env: Any, state: Any) -> np.ndarray:
    # gymnasium keeps this env's state in float32 after the first step.
    u = reference_env.unwrapped
    u.state = _floats(state.position, state.velocity, dtype=np.float32)
    set_elapsed_steps(reference_env, state.time)
    return np.array(u.state, np.float32)


def sync_pendulum(reference_env: Any, state: Any) -> np.ndarray:
    u = reference_env.unwrapped
    u.state = _floats(state.theta, state.theta_dot)
    set_elapsed_steps(reference_env, state.time)
    return u._get_obs()


#: Ready-made ``sync_state`` functions, keyed by gymnasium id.
SYNC_FUNCTIONS: dict[str, Callable[[Any, Any], Any]] = {
    "CartPole-v1": sync_cartpole,
    "Acrobot-v1": sync_acrobot,
    "MountainCar-v0": sync_mountain_car,
    "MountainCarContinuous-v0": sync_mountain_car_continuous,
    "Pendulum-v1": sync_pendulum,
}
