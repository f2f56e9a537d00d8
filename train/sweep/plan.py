"""A search expanded into the members of a population.

Fields are the base config's (any registered algorithm's config): its traced
hyperparameters (any number of values share one compiled program) or static
ones (``num_envs``, ``num_steps``, ``hidden``, ``total_timesteps``, ...; each
distinct static config compiles its own program). Env physics fields (leaves
of the env's params NamedTuple, e.g. CartPole ``length``) come in a separate
mapping and are traced too. A list gives grid values (the grid is the
Cartesian product of every list), ``Uniform``/``LogUniform`` random draws
(``samples`` settings drawn by numpy from ``sample_seed``, crossed with the
grid), a scalar one fixed value. Values are checked against the algorithm's
and the env's declared ranges before anything compiles. Every setting is run
once per seed; a seed's members form its group (one search of its own when a
strategy acts between rounds).
"""

import difflib
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from ondevice_rl.env.types import scalar_param_fields
from ondevice_rl.nn.networks import ACTIVATIONS
from ondevice_rl.train.kit.registry import algorithm_of, trainer_for
from ondevice_rl.train.run.checks import SEED_BOUND, SEED_RANGE
from ondevice_rl.train.sweep.space import (
    Distribution,
    LogUniform,
    SweepSpecError,
    Uniform,
    shortest,
)

#: Members a sweep may have: its plan lists them all, one by one.
MAX_MEMBERS = 2**20
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
    #: The hyperparameters' specs as asked (what a strategy samples from).
    search: dict = field(default_factory=dict)

    @property
    def num_settings(self) -> int:
        return len({m.setting for m in self.members})

    @property
    def groups(self) -> np.ndarray:
        """``[P]`` int32: each member's group, the position of its seed."""
        position = {seed: g for g, seed in enumerate(self.seeds)}
        return np.asarray([position[m.seed] for m in self.members], np.int32)

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


def _checked(check, name: str, value: Any) -> Any:
    """``check(name, value)``, its ValueError as a ``SweepSpecError``."""
    try:
        return check(name, value)
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


def _fields(config: Any, search: dict, env_search: dict) -> tuple[Any, dict]:
    """``(env, {env param: dtype})`` once every name asked for is known and
    the learner can act in the env."""
    if "env" in search:
        raise SweepSpecError("env cannot be swept; run one sweep per environment")
    algorithm = algorithm_of(config)
    known = algorithm.hyperparam_fields + algorithm.static_fields
    for name in search:
        if name not in known:
            raise _unknown("field", name, known)
    try:  # the env exists and the learner can act in it
        trainer = trainer_for(config)
    except KeyError as err:
        raise SweepSpecError(err.args[0]) from None
    except ValueError as err:
        raise SweepSpecError(str(err)) from None
    fields = scalar_param_fields(trainer.default_env_params)  # nested ones too
    env_fields = {name: np.asarray(value).dtype for name, value in fields.items()}
    for name in env_search:
        if name not in env_fields:
            raise _unknown(f"{config.env} env param", name, tuple(env_fields))
    return trainer.env.unwrapped, env_fields


def _grid_and_ranges(config, search, env_search, env_fields) -> tuple[dict, dict]:
    """``({key: values}, {key: distribution})`` of the search, env fields
    keyed ``env.<name>``; random ranges checked against the declared ones."""
    algorithm = algorithm_of(config)
    grid: dict[str, list] = {}
    random: dict[str, Distribution] = {}
    for prefix, spec_map in (("", search), (ENV_PREFIX, env_search)):
        for name, spec in spec_map.items():
            values = _as_list(prefix + name, spec)
            if isinstance(values, list):
                grid[prefix + name] = values
                continue
            if prefix:
                if np.issubdtype(env_fields[name], np.integer):
                    raise SweepSpecError(f"env param {name} is an integer; give a list")
            elif name not in algorithm.hyperparam_fields:
                raise SweepSpecError(
                    f"{name} sets shapes or loop lengths; give a list of values, "
                    "random ranges are for hyperparameters and env params"
                )
            else:
                check = algorithm.ranges[name].check
                _checked(check, name, values.low)
                _checked(check, name, values.high)
            random[prefix + name] = values
    return grid, random


def _check_samples(random: dict, samples: int | None) -> None:
    if random and samples is None:
        raise SweepSpecError(
            f"random ranges ({', '.join(random)}) need a number of samples "
            "(--samples N)"
        )
    if samples is not None and not random:
        raise SweepSpecError("samples given but no uniform/loguniform range")
    if samples is not None and samples < 1:
        raise SweepSpecError(f"samples must be >= 1, got {samples}")


def _draws(random: dict, samples: int | None, sample_seed: int) -> list[dict]:
    """The random settings: ``samples`` draws of every range (one empty
    setting without ranges)."""
    if not random:
        return [{}]
    rng = np.random.default_rng(sample_seed)
    columns = {key: dist.sample(rng, samples) for key, dist in random.items()}
    return [{k: shortest(col[i]) for k, col in columns.items()} for i in range(samples)]


def _setting(config: Any, env: Any, values: dict) -> tuple[Any, tuple]:
    """``(member config, sorted env params)`` of one setting's values."""
    algorithm = algorithm_of(config)
    changes, env_values = {}, {}
    for key, value in values.items():
        if key.startswith(ENV_PREFIX):
            name = key[len(ENV_PREFIX) :]
            check = lambda n, v: env.check_params({n: v})[n]  # noqa: E731
            env_values[name] = _checked(check, name, value)
        elif key in algorithm.hyperparam_fields:
            changes[key] = _checked(algorithm.ranges[key].check, key, value)
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
    return member_config, tuple(sorted(env_values.items()))


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
    search, env_search = dict(search or {}), dict(env_params or {})
    env, env_fields = _fields(config, search, env_search)
    grid, random = _grid_and_ranges(config, search, env_search, env_fields)
    _check_samples(random, samples)
    seed_count = seeds if isinstance(seeds, int | np.integer) else len(seeds)
    count = math.prod(map(len, grid.values())) * (samples or 1) * seed_count
    if count > MAX_MEMBERS:  # before a list of them is made
        raise SweepSpecError(
            f"{count:,} members (settings x samples x seeds) is more than a "
            f"sweep may have ({MAX_MEMBERS:,})"
        )
    draws = _draws(random, samples, sample_seed)
    seed_list = _seed_list(seeds)
    # Fields given one value are fixed changes, not swept dimensions.
    varied = [k for k in (*grid, *random) if k in random or len(grid[k]) > 1]
    swept = tuple(k for k in varied if not k.startswith(ENV_PREFIX))
    swept += tuple(k for k in varied if k.startswith(ENV_PREFIX))
    members = []
    grid_points = itertools.product(*grid.values())
    for setting, (point, draw) in enumerate(itertools.product(grid_points, draws)):
        values = {**dict(zip(grid, point, strict=True)), **draw}
        member_config, env_pairs = _setting(config, env, values)
        for seed in seed_list:
            members.append(
                Member(len(members), setting, seed, member_config, env_pairs)
            )
    fixed = {k: v[0] for k, v in grid.items() if len(v) == 1}
    hyperparams = algorithm_of(config).hyperparam_fields
    space = {k: v for k, v in search.items() if k in hyperparams}
    return SweepPlan(config, tuple(members), swept, seed_list, fixed, space)
