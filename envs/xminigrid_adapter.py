"""XLand-MiniGrid behind our protocol. Install with
``pip install 'ondevice_rl[xminigrid]'``.

    env, params = ondevice_rl.make("xminigrid/MiniGrid-Empty-8x8")
    obs, state = env.reset(key, params)  # obs [7, 7, 2] uint8

XLand-MiniGrid's ``env.step(params, timestep, action)`` does not reset (its
auto-reset is a wrapper, ``GymAutoResetWrapper``, not used here), so our
``AutoReset`` computes the only reset, ``env.reset(params, key)`` from a
fresh key. The step is deterministic: it ignores its key.

Its step type is ``LAST`` at the goal or at its time limit (``step_num ==
max_steps``) and its discount is 0 only at the goal: ``terminated`` is
``discount == 0``, and the truncation is ours, at ``params.max_steps``
(default XLand-MiniGrid's own limit, which its reward also reads: ``1 - 0.9
· step / limit`` at the goal). ``make(..., max_steps=N)`` sets both; a
longer ``params.max_steps`` alone keeps the reward's limit, so late
successes pay less than nothing.

Observations are the agent's view ``[V, V, 2]`` of (tile id ≤ 12, colour
≤ 11), ``uint8``, declared categorical.

The MiniGrid-style environments carry their goal and rules in the package.
The ``XLand-MiniGrid-R*`` ones draw a ruleset per episode from a benchmark
(``benchmark="trivial-21k"`` by default) that xminigrid downloads from
Hugging Face at run time: it is read from xminigrid's data folder
(``~/.xland_minigrid``, or ``$XLAND_MINIGRID_DATA``) when it is already
there, or from ``benchmark_path``, and is otherwise unavailable offline (a
one-line error; ``xminigrid.load_benchmark(name)`` run once with network
access puts it there).
"""

import os
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.env.spaces import Box, Discrete
from ondevice_rl.envs.suite_adapter import (
    SuiteAdapter,
    TimeLimit,
    import_suite,
    without_observation,
)

#: xminigrid 0.9's environments (``xminigrid.registered_environments()``; a
#: test checks the two agree), listed so that the registry imports nothing.
MINIGRID_IDS = (
    "MiniGrid-BlockedUnlockPickUp",
    "MiniGrid-DoorKey-5x5",
    "MiniGrid-DoorKey-6x6",
    "MiniGrid-DoorKey-8x8",
    "MiniGrid-DoorKey-16x16",
    "MiniGrid-Empty-5x5",
    "MiniGrid-Empty-6x6",
    "MiniGrid-Empty-8x8",
    "MiniGrid-Empty-16x16",
    "MiniGrid-EmptyRandom-5x5",
    "MiniGrid-EmptyRandom-6x6",
    "MiniGrid-EmptyRandom-8x8",
    "MiniGrid-EmptyRandom-16x16",
    "MiniGrid-FourRooms",
    "MiniGrid-LockedRoom",
    "MiniGrid-MemoryS8",
    "MiniGrid-MemoryS16",
    "MiniGrid-MemoryS32",
    "MiniGrid-MemoryS64",
    "MiniGrid-MemoryS128",
    "MiniGrid-Playground",
    "MiniGrid-Unlock",
    "MiniGrid-UnlockPickUp",
)
XLAND_IDS = tuple(
    f"XLand-MiniGrid-R{rooms}-{side}x{side}"
    for rooms, sides in (
        (1, (9, 11, 13, 15, 17)),
        (2, (9, 11, 13, 15, 17)),
        (4, (9, 11, 13, 15, 17)),
        (6, (13, 17, 19)),
        (9, (16, 19, 25)),
    )
    for side in sides
)
#: Largest (tile id, colour) of a cell.
GRID_HIGH = (12, 11)
DEFAULT_BENCHMARK = "trivial-21k"


class XMiniGridState(NamedTuple):
    xminigrid_timestep: Any  # xminigrid.types.TimeStep: its state and step count
    time: jax.Array  # [] int32


class XLandParams(NamedTuple):
    benchmark: Any  # xminigrid.benchmarks.Benchmark: the rulesets drawn from
    max_steps: jax.Array  # [] int32


class XMiniGridAdapter(SuiteAdapter):
    """Wraps ``xminigrid.make(xminigrid_id, **kwargs)``; ``max_steps``
    (default XLand-MiniGrid's limit) is its limit and our default one."""

    state_type = XMiniGridState
    stochastic_step = False

    def __init__(
        self,
        xminigrid_id: str,
        max_steps: int | None = None,
        benchmark: str = DEFAULT_BENCHMARK,
        benchmark_path: str | None = None,
        **kwargs: Any,
    ):
        xminigrid = import_suite("xminigrid", "xminigrid", "xminigrid")
        self.name = f"xminigrid/{xminigrid_id}"
        if max_steps is not None:  # the suite's limit, read by its reward
            kwargs["max_steps"] = int(max_steps)
        self.xminigrid_env, self._xminigrid_params = xminigrid.make(
            xminigrid_id, **kwargs
        )
        self._max_steps = int(self._xminigrid_params.max_steps)
        self._benchmark = None
        if xminigrid_id.startswith("XLand-"):
            self._benchmark = _load_benchmark(benchmark, benchmark_path)

    def default_params(self) -> TimeLimit | XLandParams:
        if self._benchmark is None:
            return super().default_params()
        return XLandParams(self._benchmark, jnp.int32(self._max_steps))

    def _reset(self, key, params):
        xparams = self._xminigrid_params
        if self._benchmark is not None:
            key, ruleset_key = jax.random.split(key)
            ruleset = params.benchmark.sample_ruleset(ruleset_key)
            xparams = xparams.replace(ruleset=ruleset)
        timestep = self.xminigrid_env.reset(xparams, key)
        return timestep.observation, without_observation(timestep)

    def _step(self, key, inner, action, params):
        # The step reads the rules from the state, not from the params.
        timestep = self.xminigrid_env.step(self._xminigrid_params, inner, action)
        terminated = timestep.discount == 0
        obs = timestep.observation
        return obs, without_observation(timestep), timestep.reward, terminated

    def observation_space(self, params):
        shape = self.xminigrid_env.observation_shape(self._xminigrid_params)
        high = jnp.asarray(GRID_HIGH, jnp.uint8)
        return Box(0, high, tuple(shape), jnp.uint8, categorical=True)

    def action_space(self, params):
        return Discrete(int(self.xminigrid_env.num_actions(self._xminigrid_params)))


def _load_benchmark(name: str, path: str | None) -> Any:
    """The benchmark from ``path`` or xminigrid's data folder; a one-line
    ValueError when it is not on this machine (never downloaded here)."""
    from xminigrid import benchmarks  # lazy: xminigrid is an optional extra

    if path is None:
        if name not in benchmarks.NAME2HFFILENAME:
            known = ", ".join(benchmarks.registered_benchmarks())
            raise ValueError(
                f"unknown XLand-MiniGrid benchmark {name!r}; known: {known}"
            )
        path = os.path.join(benchmarks.DATA_PATH, benchmarks.NAME2HFFILENAME[name])
    if not os.path.exists(path):
        raise ValueError(
            f"XLand-MiniGrid's rulesets ({name}) are downloaded from Hugging Face "
            f"at run time: unavailable offline (no {path}; "
            f"xminigrid.load_benchmark({name!r}) with network access puts it there)"
        )
    return benchmarks.load_benchmark_from_path(path)
