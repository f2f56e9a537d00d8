"""An environment ready for a learner: wrapped for the rollout, its spaces read.

Every algorithm builds its env the same way: ``envs.make(name)`` (a
registered name or ``package.module:factory``), the protocol's static checks
(``ondevice_rl.env_static``: a shape or dtype bug is one line here, not a
traceback from inside the compiled program), then
``EpisodeStats(AutoReset(env))`` so episodes restart inside the compiled
rollout and report their statistics.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl import envs
from ondevice_rl.env_static import require_static
from ondevice_rl.spaces import Box
from ondevice_rl.types import Environment
from ondevice_rl.wrappers import AutoReset, EpisodeStats


class EnvSetup(NamedTuple):
    env: Environment  # EpisodeStats(AutoReset(base env))
    default_params: Any
    obs_shape: tuple[int, ...]
    continuous: bool  # Box action space
    action_dim: int  # number of discrete actions, or the Box's size
    to_env_action: Callable[[jax.Array], jax.Array]  # clip to a Box; identity


def require_discrete(setup: EnvSetup, learner: str, env_name: str) -> EnvSetup:
    """``setup``, or a one-line ValueError if its action space is continuous
    (for learners that pick actions by argmax)."""
    if setup.continuous:
        raise ValueError(
            f"{learner} needs a discrete action space; {env_name} has a "
            "continuous one (try ppo or a2c)"
        )
    return setup


#: Names whose env passed the static checks in this process.
_CHECKED: set[str] = set()


def make_env(name: str) -> EnvSetup:
    """Builds the wrapped env ``name`` (KeyError naming close matches if
    unknown; ValueError, one line, if it breaks the protocol)."""
    env, params = envs.make(name)
    if name not in _CHECKED:
        require_static(env, params, name)
        _CHECKED.add(name)
    space = env.action_space(params)
    continuous = isinstance(space, Box)
    obs_shape = tuple(env.observation_space(params).shape)
    if continuous:
        low, high = space.low, space.high

        def to_env_action(action):
            return jnp.clip(action, low, high)

        action_dim = space.shape[0]
    else:

        def to_env_action(action):
            return action

        action_dim = space.n
    return EnvSetup(
        EpisodeStats(AutoReset(env)),
        params,
        obs_shape,
        continuous,
        int(action_dim),
        to_env_action,
    )
