"""Any gymnax environment behind our protocol (no auto-reset inside ``step``).

``step`` calls gymnax's ``step_env`` (the dynamics alone; gymnax's ``step``
would reset by itself) and adds our time limit: ``truncated = time >=
max_steps``, ``max_steps`` defaulting to gymnax's ``max_steps_in_episode``.
``terminated`` is gymnax's ``done`` without the time limit (gymnax ≥ 1.0's
``done`` already excludes it; older versions included it).

Observations are float32 whatever gymnax's dtype (MinAtar's ``[10, 10, C]``
channels, bsuite's grids, FourRooms' int coordinates) and the observation
space a float32 ``Box`` of the same shape; a ``Discrete(n)`` observation
(FrozenLake's cell index) becomes its one-hot ``[n]`` vector.

    env, params = ondevice_rl.make("gymnax/CartPole-v1")
    env, params = ondevice_rl.make("gymnax/Breakout-MinAtar")  # obs [10, 10, 4]
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.spaces import Box, Discrete
from ondevice_rl.types import Environment, TimeStep


class GymnaxParams(NamedTuple):
    env_params: Any  # gymnax's own params pytree
    max_steps: jax.Array  # [] int32, our time limit


class GymnaxAdapter(Environment):
    """Wraps ``gymnax.make(gymnax_id)``; state is gymnax's state (has ``time``).

    ``stochastic_step=False`` promises that gymnax's ``step_env`` ignores its
    key (true of CartPole, MountainCar(Continuous) and Pendulum), so
    ``AutoReset`` may reuse it for the reset: one PRNG split less per env
    per step, the dominant cost of stepping these envs in a batch.
    """

    def __init__(self, gymnax_id: str, *, stochastic_step: bool = True, **kwargs):
        import gymnax

        self.stochastic_step = stochastic_step
        self.gymnax_env, self._gymnax_params = gymnax.make(gymnax_id, **kwargs)
        self.name = f"gymnax/{gymnax_id}"
        # gymnax >= 1.0 reports time limits apart (``is_truncated``).
        self._done_has_time_limit = not hasattr(self.gymnax_env, "is_truncated")
        space = self.gymnax_env.observation_space(self._gymnax_params)
        self._one_hot = int(space.n) if hasattr(space, "n") else 0

    def default_params(self) -> GymnaxParams:
        limit = self._gymnax_params.max_steps_in_episode
        return GymnaxParams(self._gymnax_params, jnp.int32(limit))

    def reset(self, key, params):
        obs, state = self.gymnax_env.reset_env(key, params.env_params)
        return self._obs(obs), _strong(state)

    def step(self, key, state, action, params) -> TimeStep:
        obs, state, reward, done, _ = self.gymnax_env.step_env(
            key, state, action, params.env_params
        )
        done = jnp.asarray(done, jnp.bool_)
        if self._done_has_time_limit:
            done = done & (state.time < params.env_params.max_steps_in_episode)
        return TimeStep(
            obs=self._obs(obs),
            state=_strong(state),
            reward=jnp.asarray(reward, jnp.float32),
            terminated=done,
            truncated=state.time >= params.max_steps,
            info={},
        )

    def _obs(self, obs) -> jax.Array:
        if self._one_hot:
            return jax.nn.one_hot(obs, self._one_hot, dtype=jnp.float32)
        return jnp.asarray(obs, jnp.float32)

    def observation_space(self, params):
        if self._one_hot:
            return Box(0.0, 1.0, (self._one_hot,), jnp.float32)
        return _space(self.gymnax_env.observation_space(params.env_params))

    def action_space(self, params):
        return _space(self.gymnax_env.action_space(params.env_params))


def _strong(tree: Any) -> Any:
    """Python/weakly-typed scalars (gymnax's ``time=0``) → fixed-dtype arrays,
    so ``lax.scan`` carries keep one type."""
    return jax.tree.map(lambda x: jnp.asarray(x, jnp.result_type(x)), tree)


def _space(space: Any) -> Discrete | Box:
    if hasattr(space, "n"):
        return Discrete(int(space.n))
    low = jnp.asarray(space.low, jnp.float32)
    high = jnp.asarray(space.high, jnp.float32)
    return Box(low, high, tuple(space.shape), jnp.float32)
