"""popgym-arcade (pixel POMDPs) behind our protocol.

popgym-arcade 0.0.7 depends on ``stable-gymnax``, a fork of gymnax 0.0.x
that installs itself as the ``gymnax`` module and would replace the gymnax
1.0.1 this package depends on. Install it without its dependencies::

    pip install 'ondevice_rl[popgym]'   # dm-pix and jaxtyping
    pip install --no-deps popgym-arcade==0.0.7

    env, params = ondevice_rl.make("popgym/CartPoleEasy")  # obs [128, 128, 3] uint8

The step is popgym-arcade's ``step_env`` (the dynamics alone; its ``step``
would reset by itself), so our ``AutoReset`` computes the only reset,
``reset_env`` from a fresh key. ``partial_obs=True`` (a keyword of ``make``)
gives the partially observed variant.

popgym-arcade returns one ``done``: its time limit (an attribute of the
environment, ``max_steps_in_episode`` or ``max_episode_length``, counted by a
step counter whose name varies by game) or the game's end. We count the
steps ourselves and compare that count with the time limit: ``terminated =
done and count < limit``, and the truncation is ours, at ``params.max_steps``
(default popgym-arcade's limit, which some games' rewards also read). A game
that ends on exactly the last step of its limit is reported truncated only.
popgym-arcade's CartPole checks its limit (and the pole) on the state before
the step, so its own episodes last one step past the limit; ours end at it.

Under gymnax 1.0.1 the base class' ``discount`` calls ``is_terminated``,
which popgym-arcade does not define (it defines ``is_terminal``, as gymnax
0.0.x named it); the adapter points the one at the other, as gymnax 0.0.x
does.
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.env.spaces import Box, Discrete
from ondevice_rl.envs.gymnax_adapter import narrow_64_bit
from ondevice_rl.envs.suite_adapter import SuiteAdapter, import_suite

HOW_TO_INSTALL = (
    "pip install 'ondevice_rl[popgym]' && pip install --no-deps popgym-arcade==0.0.7"
)
#: popgym-arcade 0.0.7's games (``popgym_arcade.registration.
#: REGISTERED_ENVIRONMENTS``; a test checks the two agree).
POPGYM_IDS = tuple(
    f"{game}{level}"
    for game in (
        "CartPole",
        "NoisyCartPole",
        "CountRecall",
        "BattleShip",
        "AutoEncode",
        "Navigator",
        "MineSweeper",
        "Skittles",
        "Breakout",
        "Tetris",
    )
    for level in ("Easy", "Medium", "Hard")
)


class PopgymParams(NamedTuple):
    env_params: Any  # popgym-arcade's EnvParams (32-bit leaves)
    max_steps: jax.Array  # [] int32, our time limit


class PopgymState(NamedTuple):
    popgym_state: Any  # the game's EnvState
    time: jax.Array  # [] int32


class PopgymArcadeAdapter(SuiteAdapter):
    """Wraps ``popgym_arcade.make(popgym_id, **kwargs)``."""

    state_type = PopgymState
    stochastic_step = True

    def __init__(self, popgym_id: str, max_steps: int | None = None, **kwargs: Any):
        popgym_arcade = import_suite(
            "popgym_arcade", "popgym-arcade", "popgym", HOW_TO_INSTALL
        )
        self.name = f"popgym/{popgym_id}"
        env, env_params = popgym_arcade.make(popgym_id, **kwargs)
        if "is_terminated" not in _defined(type(env)) and hasattr(env, "is_terminal"):
            env.is_terminated = env.is_terminal
        self.popgym_env = env
        self._popgym_params = narrow_64_bit(env_params)
        # The games name their time limit one of two ways.
        limit = getattr(env, "max_steps_in_episode", None)
        self._limit = int(env.max_episode_length if limit is None else limit)
        self._max_steps = self._limit if max_steps is None else int(max_steps)

    def default_params(self) -> PopgymParams:
        return PopgymParams(self._popgym_params, jnp.int32(self._max_steps))

    def _reset(self, key, params):
        return self.popgym_env.reset_env(key, params.env_params)

    def _step(self, key, inner, action, params):
        obs, inner, reward, done, _ = self.popgym_env.step_env(
            key, inner, action, params.env_params
        )
        return obs, inner, reward, done

    def step(self, key, state, action, params):
        ts = super().step(key, state, action, params)
        # Our step count, not the game's counter (not always the step count).
        at_limit = ts.state.time >= self._limit
        return ts._replace(terminated=ts.terminated & ~at_limit)

    def observation_space(self, params):
        space = self.popgym_env.observation_space(params.env_params)
        return Box(0, 255, tuple(space.shape), jnp.dtype(space.dtype))

    def action_space(self, params):
        return Discrete(int(self.popgym_env.action_space(params.env_params).n))


def _defined(cls: type) -> set[str]:
    """Names defined by ``cls`` and its bases other than gymnax's own."""
    names = set()
    for base in cls.__mro__:
        if not base.__module__.startswith(("gymnax", "builtins")):
            names.update(vars(base))
    return names
