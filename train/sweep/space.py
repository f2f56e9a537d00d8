"""Search spaces → the list of population members.

A search maps field names to values:

* a list/tuple → grid values (the grid is the Cartesian product of all lists);
* ``Uniform(lo, hi)`` / ``LogUniform(lo, hi)`` → random draws: ``samples``
  settings are drawn (numpy, ``sample_seed``) and crossed with the grid;
* a scalar → one fixed value.

Fields are the base config's fields (any registered algorithm's config): its
traced hyperparameters (any number of values share one compiled program) or
static ones (``num_envs``, ``num_steps``, ``hidden``, ``total_timesteps``,
...; each distinct static config compiles its own program). Values are
checked against the algorithm's declared ranges before anything compiles.
Env physics fields (leaves of the env's params NamedTuple, e.g. CartPole
``length``) come in a separate mapping and are traced too. Every setting is
run once per seed.
"""

import difflib
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from ondevice_rl import envs
from ondevice_rl.env.types import scalar_param_fields
from ondevice_rl.nn.networks import ACTIVATIONS
from ondevice_rl.train.kit.registry import algorithm_of, trainer_for
from ondevice_rl.train.run.checks import SEED_BOUND, SEED_RANGE

#: Members a sweep may have: its plan lists them all, one by one.
MAX_MEMBERS = 2**20


class SweepSpecError(ValueError):
    """A search specification that cannot be run (one-line message)."""


@dataclass(frozen=True)
class Uniform:
    """Random values uniform in ``[low, high]``."""

    low: float
    high: float

    def __post_init__(self):
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            raise SweepSpecError(f"uniform bounds must be finite: {self}")
        if not self.low < self.high:
            raise SweepSpecError(f"uniform needs low < high, got {self}")

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.uniform(self.low, self.high, n)


@dataclass(frozen=True)
class LogUniform:
    """Random values whose logarithm is uniform in ``[log low, log high]``."""

    low: float
    high: float

    def __post_init__(self):
        if not (0 < self.low < self.high and math.isfinite(self.high)):
            raise SweepSpecError(f"loguniform needs 0 < low < high, got {self}")

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.exp(rng.uniform(math.log(self.low), math.log(self.high), n))


Distribution = Uniform | LogUniform

ENV_PREFIX = "env."


class Member(NamedTuple):
    """One trained agent of the population.

    ``config`` carries the member's static fields *and* its hyperparameter
    values (``config.hyperparams``); ``env_params`` the swept physics values
    as sorted ``(name, value)`` pairs; ``setting`` numbers the distinct
    combination of swept values (members differing only by seed share it).
    """

    index: int
    setting: int
    seed: int
    config: Any  # the algorithm's config
    env_params: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class SweepPlan:
    """The members to train and what was swept (for tables and plots)."""

    base: Any  # the algorithm's config
    members: tuple[Member, ...]
    swept: tuple[str, ...]  # config fields, then "env.<name>" fields
    seeds: tuple[int, ...]
    #: Fields given a single value: applied to every member, not swept.
    fixed: dict = field(default_factory=dict)

    @property
    def num_settings(self) -> int:
        return len({m.setting for m in self.members})

    def setting_values(self, member: Member) -> dict[str, Any]:
        """``{swept field: value}`` of ``member`` (env fields as ``env.<name>``)."""
        env_values = {ENV_PREFIX + k: v for k, v in member.env_params}
        return {
            name: env_values[name]
            if name.startswith(ENV_PREFIX)
            else getattr(member.config, name)
            for name in self.swept
        }


def _unknown(kind: str, name: str, known: Sequence[str]) -> SweepSpecError:
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return SweepSpecError(f"unknown {kind} {name!r}{hint}; known: {', '.join(known)}")


def _as_list(name: str, spec: Any) -> list | Distribution:
    if isinstance(spec, Uniform | LogUniform):
        return spec
    if isinstance(spec, str) or not isinstance(spec, Sequence):
        return [spec]
    if len(spec) == 0:
        raise SweepSpecError(f"{name}: empty list of values")
    return list(spec)


def _check_hp(ranges, name: str, value: Any) -> float:
    try:
        return ranges[name].check(name, value)
    except ValueError as err:
        raise SweepSpecError(str(err)) from None


def _shortest_float32(value: float) -> float:
    """The float32 nearest ``value``, written with the fewest digits."""
    return float(str(np.float32(value)))


def _check_dist_bounds(ranges, name: str, dist: Distribution) -> None:
    _check_hp(ranges, name, dist.low)
    _check_hp(ranges, name, dist.high)


def env_param_fields(env_name: str) -> dict[str, np.dtype]:
    """Sweepable scalar leaves of an env's params, a suite's params nested
    in an adapter's included: ``{name: dtype}``."""
    fields = scalar_param_fields(envs.make(env_name)[1])
    return {name: np.asarray(value).dtype for name, value in fields.items()}


def _check_env_value(env: Any, name: str, value: Any) -> float | int:
    """One env param value, checked against the env's declared range."""
    try:
        return env.check_params({name: value})[name]
    except ValueError as err:
        raise SweepSpecError(str(err)) from None


def _seed_list(seeds: int | Sequence[int]) -> tuple[int, ...]:
    if isinstance(seeds, int | np.integer):
        if seeds < 1:
            raise SweepSpecError(f"seeds must be >= 1, got {seeds}")
        return tuple(range(int(seeds)))
    seeds = tuple(int(s) for s in seeds)
    if not seeds:
        raise SweepSpecError("empty list of seeds")
    if len(set(seeds)) != len(seeds):
        raise SweepSpecError(f"repeated seeds in {list(seeds)}")
    if not all(0 <= s < SEED_BOUND for s in seeds):
        raise SweepSpecError(f"seeds must be in {SEED_RANGE}, got {list(seeds)}")
    return seeds


def build_plan(
    config: Any,
    seeds: int | Sequence[int] = 1,
    search: Mapping[str, Any] | None = None,
    env_params: Mapping[str, Any] | None = None,
    samples: int | None = None,
    sample_seed: int = 0,
) -> SweepPlan:
    """Expands a search into members: settings (grid × random draws) × seeds.

    Args:
        config: base configuration, any registered algorithm's (values of
            unswept fields).
        seeds: a count ``n`` (seeds ``0..n-1``) or explicit seeds.
        search: config field → list, ``Uniform``, ``LogUniform`` or
            scalar. Random ranges are allowed on hyperparameters only.
        env_params: env params field → the same kinds of values.
        samples: number of random draws; required iff a random range is given.
        sample_seed: seed of the numpy generator that draws them.

    Raises:
        SweepSpecError: unknown field, bad value, inconsistent request, or an
            env that is unknown or that the learner cannot act in.
    """
    search = dict(search or {})
    env_search = dict(env_params or {})
    if "env" in search:
        raise SweepSpecError("env cannot be swept; run one sweep per environment")
    algorithm = algorithm_of(config)
    hyperparam_fields, ranges = algorithm.hyperparam_fields, algorithm.ranges
    known = hyperparam_fields + algorithm.static_fields
    for name in search:
        if name not in known:
            raise _unknown("field", name, known)
    try:  # the env exists and the learner can act in it
        trainer = trainer_for(config)
    except KeyError as err:
        raise SweepSpecError(err.args[0]) from None
    except ValueError as err:
        raise SweepSpecError(str(err)) from None
    env = trainer.env.unwrapped
    fields = scalar_param_fields(trainer.default_env_params)  # nested ones too
    env_fields = {name: np.asarray(value).dtype for name, value in fields.items()}
    for name in env_search:
        if name not in env_fields:
            raise _unknown(f"{config.env} env param", name, tuple(env_fields))

    grid: dict[str, list] = {}
    random: dict[str, Distribution] = {}
    for prefix, spec_map in (("", search), (ENV_PREFIX, env_search)):
        for name, spec in spec_map.items():
            key = prefix + name
            values = _as_list(key, spec)
            if isinstance(values, list):
                grid[key] = values
                continue
            if prefix:
                if np.issubdtype(env_fields[name], np.integer):
                    raise SweepSpecError(f"env param {name} is an integer; give a list")
            elif name not in hyperparam_fields:
                raise SweepSpecError(
                    f"{name} sets shapes or loop lengths; give a list of values, "
                    "random ranges are for hyperparameters and env params"
                )
            else:
                _check_dist_bounds(ranges, name, values)
            random[key] = values
    if random and samples is None:
        raise SweepSpecError(
            f"random ranges ({', '.join(random)}) need a number of samples "
            "(--samples N)"
        )
    if samples is not None and not random:
        raise SweepSpecError("samples given but no uniform/loguniform range")
    if samples is not None and samples < 1:
        raise SweepSpecError(f"samples must be >= 1, got {samples}")
    seed_count = seeds if isinstance(seeds, int | np.integer) else len(seeds)
    count = math.prod(map(len, grid.values())) * (samples or 1) * seed_count
    if count > MAX_MEMBERS:  # before a list of them is made
        raise SweepSpecError(
            f"{count:,} members (settings x samples x seeds) is more than a "
            f"sweep may have ({MAX_MEMBERS:,})"
        )

    draws: list[dict[str, Any]] = [{}]
    if random:
        rng = np.random.default_rng(sample_seed)
        columns = {key: dist.sample(rng, samples) for key, dist in random.items()}
        draws = [
            {k: _shortest_float32(col[i]) for k, col in columns.items()}
            for i in range(samples)
        ]

    seed_list = _seed_list(seeds)
    # Fields given one value are fixed changes, not swept dimensions.
    varied = [k for k in (*grid, *random) if k in random or len(grid[k]) > 1]
    swept = tuple(k for k in varied if not k.startswith(ENV_PREFIX))
    swept += tuple(k for k in varied if k.startswith(ENV_PREFIX))
    members = []
    grid_points = itertools.product(*grid.values())
    for setting, (point, draw) in enumerate(itertools.product(grid_points, draws)):
        values = {**dict(zip(grid, point, strict=True)), **draw}
        changes, env_values = {}, {}
        for key, value in values.items():
            if key.startswith(ENV_PREFIX):
                name = key[len(ENV_PREFIX) :]
                env_values[name] = _check_env_value(env, name, value)
            elif key in hyperparam_fields:
                changes[key] = _check_hp(ranges, key, value)
            elif key == "hidden":
                changes[key] = (value,) if isinstance(value, int) else tuple(value)
            else:
                if key == "activation" and value not in ACTIVATIONS:
                    raise _unknown("activation", value, tuple(ACTIVATIONS))
                changes[key] = value
        try:
            member_config = config.replace(**changes)
        except (TypeError, ValueError) as err:
            shown = ", ".join(f"{k}={v}" for k, v in changes.items())
            raise SweepSpecError(f"invalid setting {shown}: {err}") from None
        env_pairs = tuple(sorted(env_values.items()))
        for seed in seed_list:
            members.append(
                Member(len(members), setting, seed, member_config, env_pairs)
            )
    fixed = {k: v[0] for k, v in grid.items() if len(v) == 1}
    return SweepPlan(config, tuple(members), swept, seed_list, fixed)
