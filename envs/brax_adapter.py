"""A brax environment behind our protocol (brax is imported lazily).

``brax.envs.get_environment(name)`` gives the bare environment (no episode or
auto-reset wrapper); we add the time limit: ``truncated = time >= max_steps``
(default 1000). ``obs = state.obs``, ``reward = state.reward``,
``terminated = state.done``. Brax physics is deterministic: ``step`` ignores
its key. Install with ``pip install 'ondevice_rl[brax]'``.

    env, params = ondevice_rl.make("brax/ant")
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.spaces import Box
from ondevice_rl.types import Environment, TimeStep


class BraxParams(NamedTuple):
    max_steps: jax.Array  # [] int32


class BraxState(NamedTuple):
    brax_state: Any  # brax.envs.State
    time: jax.Array  # [] int32


class BraxAdapter(Environment):
    """Wraps ``brax.envs.get_environment(name, **kwargs)``."""

    stochastic_step = False

    def __init__(self, brax_name: str, max_steps: int = 1000, **kwargs: Any):
        try:
            from brax import envs as brax_envs
        except ImportError as e:
            raise ImportError(
                "brax is not installed: pip install 'ondevice_rl[brax]'"
            ) from e
        self.brax_env = brax_envs.get_environment(brax_name, **kwargs)
        self.name = f"brax/{brax_name}"
        self._max_steps = int(max_steps)

    def default_params(self) -> BraxParams:
        return BraxParams(jnp.int32(self._max_steps))

    def reset(self, key, params):
        state = self.brax_env.reset(key)
        return state.obs, BraxState(state, jnp.int32(0))

    def step(self, key, state, action, params) -> TimeStep:
        brax_state = self.brax_env.step(state.brax_state, action)
        time = state.time + 1
        return TimeStep(
            obs=brax_state.obs,
            state=BraxState(brax_state, time),
            reward=jnp.asarray(brax_state.reward, jnp.float32),
            terminated=brax_state.done > 0.5,
            truncated=time >= params.max_steps,
            info={},
        )

    def observation_space(self, params):
        size = self.brax_env.observation_size
        return Box(-jnp.inf, jnp.inf, (int(size),), jnp.float32)

    def action_space(self, params):
        return Box(-1.0, 1.0, (int(self.brax_env.action_size),), jnp.float32)
