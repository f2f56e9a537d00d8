"""An environment ready for a learner: wrapped for the rollout, its spaces read.

Every algorithm builds its env the same way: ``envs.make(name)`` (a
registered name or ``package.module:factory``), the protocol's static checks
(``ondevice_rl.checks.static``: a shape or dtype bug is one line here, not a
traceback from inside the compiled program), then
``EpisodeStats(AutoReset(env))`` so episodes restart inside the compiled
rollout and report their statistics.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl import envs
from ondevice_rl.checks.static import is_space, require_static
from ondevice_rl.env.masks import has_action_mask
from ondevice_rl.env.spaces import Box
from ondevice_rl.env.types import Environment
from ondevice_rl.env.wrappers import AutoReset, EpisodeStats
from ondevice_rl.nn.encoders import observation_encoding


class EnvSetup(NamedTuple):
    env: Environment  # EpisodeStats(AutoReset(base env))
    default_params: Any
    obs_shape: tuple[int, ...] | None  # one array's shape; None for a pytree
    continuous: bool  # Box action space
    action_dim: int  # number of discrete actions, or the Box's size
    to_env_action: Callable[[jax.Array], jax.Array]  # clip to a Box; identity
    #: The observation as stored: a pytree of ``jax.ShapeDtypeStruct``
    #: (unbatched, the space's dtypes, its action mask included).
    obs_spec: Any = None
    #: The torso's description (``ondevice_rl.nn.encoders``): the rank of one
    #: small float array, or an ``ObsLayout``.
    obs_encoding: Any = 1
    #: Whether observations carry an action mask (``ondevice_rl.env.masks``).
    action_mask: bool = False

    @property
    def plain_obs(self) -> bool:
        """One float32 array with no action mask: what every learner takes."""
        return isinstance(self.obs_encoding, int) and not self.action_mask


def require_plain_obs(setup: EnvSetup, learner: str, env_name: str) -> EnvSetup:
    """``setup``, or a one-line ValueError if its observations are a pytree,
    integer, pixels or carry an action mask (for learners that take one
    float array)."""
    if not setup.plain_obs:
        what = "an action mask" if setup.action_mask else "structured observations"
        raise ValueError(
            f"{learner} takes one float32 observation array without an action "
            f"mask; {env_name} has {what} (try ppo, a2c, dqn or pqn)"
        )
    return setup


def observation_spec(space: Any) -> Any:
    """The pytree of ``jax.ShapeDtypeStruct`` of observations of ``space``."""
    return jax.tree.map(
        lambda s: jax.ShapeDtypeStruct(tuple(s.shape), jnp.dtype(s.dtype)),
        space,
        is_leaf=is_space,
    )


def zero_observation(setup: EnvSetup, batch_shape: tuple[int, ...] = ()) -> Any:
    """Zeros shaped and typed like ``[*batch_shape, ...]`` observations."""
    return jax.tree.map(
        lambda s: jnp.zeros(batch_shape + s.shape, s.dtype), setup.obs_spec
    )


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
    obs_space = env.observation_space(params)
    obs_shape = tuple(obs_space.shape) if is_space(obs_space) else None
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
        observation_spec(obs_space),
        observation_encoding(obs_space),
        has_action_mask(obs_space),
    )
