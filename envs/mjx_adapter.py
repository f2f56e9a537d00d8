"""A MuJoCo Playground (MJX) environment behind our protocol (imported lazily).

``mujoco_playground.registry.load(name)`` gives the environment; we add the
time limit: ``truncated = time >= max_steps`` (default: the environment's own
``episode_length``, 1000 for the dm_control suite). ``obs = state.obs``,
``reward = state.reward``, ``terminated = state.done``. One ``step`` is one
control step (``ctrl_dt``); Playground's training-time ``action_repeat`` is
not applied. The physics runs on MJX's JAX implementation (``impl="jax"``):
Playground's default, Warp, runs its kernels outside XLA and is far slower on
CPU. Randomness lives in the reset key (kept in ``state.info``), so ``step``
ignores its key. Install with ``pip install 'ondevice_rl[mjx]'``.

    env, params = ondevice_rl.make("mjx/CartpoleBalance")
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.spaces import Box
from ondevice_rl.types import Environment, TimeStep

#: Playground's dm_control suite environments (``registry.dm_control_suite.
#: ALL_ENVS`` in playground 0.2; a test checks the two agree), listed here so
#: that building the registry does not import Playground (≈10 s).
DM_CONTROL_SUITE = (
    "AcrobotSwingup",
    "AcrobotSwingupSparse",
    "BallInCup",
    "CartpoleBalance",
    "CartpoleBalanceSparse",
    "CartpoleSwingup",
    "CartpoleSwingupSparse",
    "CheetahRun",
    "FingerSpin",
    "FingerTurnEasy",
    "FingerTurnHard",
    "FishSwim",
    "HopperHop",
    "HopperStand",
    "HumanoidStand",
    "HumanoidWalk",
    "HumanoidRun",
    "PendulumSwingup",
    "PointMass",
    "ReacherEasy",
    "ReacherHard",
    "SwimmerSwimmer6",
    "WalkerRun",
    "WalkerStand",
    "WalkerWalk",
)


class MjxParams(NamedTuple):
    max_steps: jax.Array  # [] int32


class MjxState(NamedTuple):
    mjx_state: Any  # mujoco_playground.State
    time: jax.Array  # [] int32


class MjxAdapter(Environment):
    """Wraps ``mujoco_playground.registry.load(name)`` with ``impl`` set."""

    stochastic_step = False

    def __init__(self, mjx_name: str, max_steps: int | None = None, impl: str = "jax"):
        try:
            from mujoco_playground import registry
        except ImportError as e:
            raise ImportError(
                "MuJoCo Playground is not installed: pip install 'ondevice_rl[mjx]'"
            ) from e
        config = registry.get_default_config(mjx_name)
        config.impl = impl
        self.mjx_env = registry.load(mjx_name, config=config)
        self.name = f"mjx/{mjx_name}"
        self._max_steps = int(config.episode_length if max_steps is None else max_steps)
        if not isinstance(self.mjx_env.observation_size, int):
            raise ValueError(
                f"{self.name} has structured observations "
                f"({self.mjx_env.observation_size}); only flat vectors are supported"
            )

    def default_params(self) -> MjxParams:
        return MjxParams(jnp.int32(self._max_steps))

    def reset(self, key, params):
        state = self.mjx_env.reset(key)
        return state.obs, MjxState(state, jnp.int32(0))

    def step(self, key, state, action, params) -> TimeStep:
        mjx_state = self.mjx_env.step(state.mjx_state, action)
        time = state.time + 1
        return TimeStep(
            obs=mjx_state.obs,
            state=MjxState(mjx_state, time),
            reward=jnp.asarray(mjx_state.reward, jnp.float32),
            terminated=mjx_state.done > 0.5,
            truncated=time >= params.max_steps,
            info={},
        )

    def observation_space(self, params):
        size = self.mjx_env.observation_size
        return Box(-jnp.inf, jnp.inf, (int(size),), jnp.float32)

    def action_space(self, params):
        return Box(-1.0, 1.0, (int(self.mjx_env.action_size),), jnp.float32)
