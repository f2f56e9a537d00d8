"""pgx's single-player games behind our protocol: 2048 and pgx's MinAtar.
Install with ``pip install 'ondevice_rl[pgx]'``.

    env, params = ondevice_rl.make("pgx/2048")  # obs["observation"] [4, 4, 31] bool

pgx's ``env.step(state, action, key)`` does not reset: a finished game stays
finished (pgx's auto-reset is an experimental wrapper, not used here), so
our ``AutoReset`` computes the only reset, ``env.init(key)`` from a fresh
key. pgx reports ``terminated`` and, apart from it, ``truncated`` (which its
games never set themselves); ``terminated`` is pgx's, and our truncation at
``params.max_steps`` is added to pgx's ``truncated``. The games have no time
limit of their own: ``PGX_IDS`` gives ours.

Observations keep pgx's ``bool`` planes; the state keeps pgx's ``State``
with an empty observation (pgx's step computes the next one afresh).
2048's legal moves come as ``obs["action_mask"]`` beside
``obs["observation"]`` (pgx sets a finished game's mask all True); pgx's
MinAtar allows every action always, so its observation is the plain
``[10, 10, C]`` array. The other pgx games are two- or more-player (not
adapted). pgx's MinAtar plays with sticky actions (10%), as MinAtar's own;
gymnax's MinAtar (``gymnax/<Game>-MinAtar``) does not.
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.env.masks import ACTION_MASK
from ondevice_rl.env.spaces import Box, Discrete
from ondevice_rl.env.types import TimeStep
from ondevice_rl.envs.suite_adapter import (
    SuiteAdapter,
    import_suite,
    without_observation,
)

#: pgx 2.6's single-player games → our default time limit.
PGX_IDS = {
    "2048": 10_000,
    "minatar-asterix": 10_000,
    "minatar-breakout": 10_000,
    "minatar-freeway": 10_000,
    "minatar-seaquest": 10_000,
    "minatar-space_invaders": 10_000,
}
#: Those whose legal action mask can rule an action out.
MASKED = ("2048",)


class PgxState(NamedTuple):
    pgx_state: Any  # the game's pgx State
    time: jax.Array  # [] int32


class PgxAdapter(SuiteAdapter):
    """Wraps ``pgx.make(pgx_id)``, player 0's reward; ``max_steps`` is ours."""

    state_type = PgxState
    stochastic_step = True

    def __init__(self, pgx_id: str, max_steps: int | None = None, **kwargs: Any):
        pgx = import_suite("pgx", "pgx", "pgx")
        self.name = f"pgx/{pgx_id}"
        self.pgx_env = pgx.make(pgx_id, **kwargs)
        if self.pgx_env.num_players != 1:
            raise ValueError(f"{self.name} has {self.pgx_env.num_players} players")
        self._masked = pgx_id in MASKED
        first = jax.eval_shape(self.pgx_env.init, jax.random.key(0))
        self._obs_shape = tuple(first.observation.shape)
        self._num_actions = int(first.legal_action_mask.shape[0])
        default = PGX_IDS.get(pgx_id, 10_000)
        self._max_steps = int(default if max_steps is None else max_steps)

    def _obs(self, state: Any) -> Any:
        if self._masked:
            mask = state.legal_action_mask
            return {"observation": state.observation, ACTION_MASK: mask}
        return state.observation

    def _reset(self, key, params):
        state = self.pgx_env.init(key)
        return self._obs(state), without_observation(state)

    def _step(self, key, inner, action, params):
        state = self.pgx_env.step(inner, action, key)
        obs, terminated = self._obs(state), state.terminated
        return obs, without_observation(state), state.rewards[0], terminated

    def step(self, key, state, action, params) -> TimeStep:
        ts = super().step(key, state, action, params)
        return ts._replace(truncated=ts.truncated | ts.state[0].truncated)

    def observation_space(self, params):
        planes = Box(0, 1, self._obs_shape, jnp.bool_)
        if not self._masked:
            return planes
        mask = Box(0, 1, (self._num_actions,), jnp.bool_)
        return {"observation": planes, ACTION_MASK: mask}

    def action_space(self, params):
        return Discrete(self._num_actions)
