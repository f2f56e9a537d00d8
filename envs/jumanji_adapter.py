"""Jumanji's single-agent environments with discrete actions behind our
protocol. Install with ``pip install 'ondevice_rl[jumanji]'``.

    env, params = ondevice_rl.make("jumanji/Maze-v0")
    obs, state = env.reset(key, params)  # obs: a dict, obs["action_mask"] [4] bool

Jumanji's ``env.step(state, action)`` does not reset (its auto-reset is a
wrapper, not used here), so our ``AutoReset`` computes the only reset,
``env.reset(key)`` from a fresh key. Jumanji draws its randomness from a key
in its state, so ``step`` ignores its key.

Jumanji ends an episode at its time limit as a *termination* (step type
``LAST``, discount 0), like any other end. The environment is therefore
built with its ``time_limit`` out of reach: its ``LAST`` steps are then the
real terminations, and the truncation is ours, at ``params.max_steps``
(default Jumanji's own ``time_limit``; for the environments without one,
whose episodes end by themselves, ``JUMANJI_IDS`` gives a generous limit).
The spaces are those Jumanji declares with its own time limit.

Observations are Jumanji's observation NamedTuple as a dict of its fields
(nested fields as nested dicts), in Jumanji's dtypes; ``"action_mask"`` is
the action mask the learners honour. Integer arrays of rank ≥ 2 whose values
start at 0 (a Rubik's cube's colours, a sliding puzzle's tiles) are declared
categorical; others (a Sudoku board with -1 for empty) keep their bounds.

Environments with several discrete choices per step and a mask over their
joint choices (Minesweeper's row × column, Tetris' rotation × column,
Sudoku's row × column × digit, BinPack, FlatPack; RubiksCube without a mask)
act in one ``Discrete`` of all the combinations, in row-major order, the mask
flattened the same way; the adapter turns the index back into Jumanji's
action.
"""

import inspect
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.env.masks import ACTION_MASK
from ondevice_rl.env.spaces import Box, Discrete
from ondevice_rl.envs.suite_adapter import NO_LIMIT, SuiteAdapter, import_suite

#: Jumanji 1.1's single-agent environments with discrete actions → the time
#: limit of those that have none of their own (None: Jumanji's
#: ``time_limit``). Their episodes end by themselves well within it.
JUMANJI_IDS = {
    "BinPack-v2": 1_000,
    "CVRP-v1": 1_000,
    "FlatPack-v0": 1_000,
    "Game2048-v1": 10_000,
    "GraphColoring-v1": 1_000,
    "Knapsack-v1": 1_000,
    "Maze-v0": None,
    "Minesweeper-v0": 1_000,
    "PacMan-v1": None,
    "RubiksCube-partly-scrambled-v0": None,
    "RubiksCube-v0": None,
    "SlidingTilePuzzle-v0": None,
    "Snake-v1": None,
    "Sudoku-v0": 1_000,
    "Sudoku-very-easy-v0": 1_000,
    "TSP-v1": 1_000,
    "Tetris-v0": None,
}
#: Jumanji's other environments, and why they are not adapted.
JUMANJI_LEFT_OUT = {
    "JobShop-v0": "one action per machine (10 × 21 choices, masked per machine): "
    "its joint space has 21^10 actions, and a factorised policy is not offered",
    "Sokoban-v0": "downloads its levels from Hugging Face when it is built: "
    "unavailable offline",
    "Cleaner-v0": "multi-agent (one action per agent)",
    "Connector-v3": "multi-agent (one action per agent)",
    "LevelBasedForaging-v0": "multi-agent (one action per agent)",
    "MMST-v0": "multi-agent (one action per agent)",
    "RobotWarehouse-v0": "multi-agent (one action per agent)",
    "MultiCVRP-v0": "multi-agent, continuous actions",
    "SearchAndRescue-v0": "multi-agent, continuous actions",
}
#: A scalar index observation with more values than this is declared a
#: bounded integer (a step count), not one to embed.
MAX_EMBEDDED_VALUES = 256


class JumanjiState(NamedTuple):
    jumanji_state: Any  # the environment's State
    time: jax.Array  # [] int32


class JumanjiAdapter(SuiteAdapter):
    """Wraps ``jumanji.make(jumanji_id, **kwargs)`` (with ``time_limit``
    out of reach where it has one); ``max_steps`` is ours."""

    state_type = JumanjiState
    stochastic_step = False

    def __init__(self, jumanji_id: str, max_steps: int | None = None, **kwargs: Any):
        jumanji = import_suite("jumanji", "jumanji", "jumanji")
        self.name = f"jumanji/{jumanji_id}"
        declared = jumanji.make(jumanji_id, **kwargs)
        own_limit = "time_limit" in inspect.signature(type(declared)).parameters
        if own_limit:
            default = declared.time_limit
            self.jumanji_env = jumanji.make(jumanji_id, **kwargs, time_limit=NO_LIMIT)
        else:
            default = JUMANJI_IDS.get(jumanji_id) or 1_000
            self.jumanji_env = declared
        self._max_steps = int(default if max_steps is None else max_steps)
        self._obs_spec = declared.observation_spec
        spec = declared.action_spec
        if hasattr(spec, "num_values") and np.ndim(spec.num_values) == 0:
            self._choices = None  # one Discrete choice
            self._num_actions = int(spec.num_values)
        elif hasattr(spec, "num_values"):
            self._choices = tuple(int(n) for n in np.asarray(spec.num_values))
            self._num_actions = int(np.prod(self._choices))
            self._action_dtype = spec.dtype
        else:
            raise ValueError(f"{self.name} has continuous actions ({spec.name})")

    def _reset(self, key, params):
        inner, timestep = self.jumanji_env.reset(key)
        return self._obs(timestep.observation), inner

    def _step(self, key, inner, action, params):
        inner, timestep = self.jumanji_env.step(inner, self._suite_action(action))
        return self._obs(timestep.observation), inner, timestep.reward, timestep.last()

    def _suite_action(self, action: jax.Array) -> jax.Array:
        """Our index → Jumanji's action (``[k]`` for several choices)."""
        if self._choices is None:
            return action
        return jnp.stack(jnp.unravel_index(action, self._choices)).astype(
            self._action_dtype
        )

    def _obs(self, observation: Any) -> dict:
        obs = _as_dict(observation, self._obs_spec)
        if ACTION_MASK in obs and self._choices is not None:
            obs[ACTION_MASK] = obs[ACTION_MASK].reshape(self._num_actions)
        return obs

    def observation_space(self, params):
        space = _space_of(self._obs_spec)
        if ACTION_MASK in space:
            space[ACTION_MASK] = Box(0, 1, (self._num_actions,), jnp.bool_)
        return space

    def action_space(self, params):
        return Discrete(self._num_actions)


def _is_array_spec(spec: Any) -> bool:
    return hasattr(spec, "shape") and hasattr(spec, "dtype")


def _as_dict(value: Any, spec: Any) -> Any:
    """A Jumanji observation → nested dicts of arrays, following its spec."""
    if _is_array_spec(spec):
        return value
    return {k: _as_dict(getattr(value, k), s) for k, s in spec._specs.items()}


def _space_of(spec: Any) -> Any:
    """A Jumanji spec → our spaces (nested dicts for nested specs)."""
    if not _is_array_spec(spec):
        return {k: _space_of(s) for k, s in spec._specs.items()}
    shape, dtype = tuple(int(n) for n in spec.shape), jnp.dtype(spec.dtype)
    if not hasattr(spec, "minimum"):
        low, high = (-jnp.inf, jnp.inf)
    else:
        low, high = np.min(spec.minimum), np.max(spec.maximum)
    if dtype == jnp.bool_:
        return Box(0, 1, shape, dtype)
    if not jnp.issubdtype(dtype, jnp.integer):
        return Box(low, high, shape, dtype)
    if not hasattr(spec, "minimum"):  # unbounded counts and positions: as they are
        return Box(-jnp.inf, jnp.inf, shape, dtype)
    if shape == () and low == 0 and high < MAX_EMBEDDED_VALUES:
        return Discrete(int(high) + 1, dtype)
    categorical = len(shape) >= 2 and low == 0
    return Box(int(low), int(high), shape, dtype, categorical=categorical)
