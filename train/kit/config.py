"""The algorithm protocol: what every learner gives the runner, sweeps, bench
and CLI.

An algorithm lives in ``train/<name>/`` and exports

* a frozen static config (``PPOConfig``, ``A2CConfig``, ...) built on
  ``AlgorithmConfig``: fields that set shapes or loop lengths, plus defaults
  of its traced hyperparameters; it validates itself on construction and
  ``config.hyperparams`` gives the traced NamedTuple of float32 scalars;
* ``make_train(config) -> train(key, hyperparams, env_params=None) ->
  TrainOutput`` whose ``metrics[name]`` has a leading ``[num_updates]`` axis;
* ``make_trainer(config)`` with at least ``config``, ``env``,
  ``default_env_params``, ``init(key, hp, env_params=None) -> state`` and
  ``run(state, hp, env_params, num_updates) -> (state, metrics)`` (scan of
  ``num_updates`` updates, static), which segmented runs compile;

and one ``Algorithm`` record, listed in ``train/kit/registry.py``.
"""

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, NamedTuple, Protocol

import jax
import jax.numpy as jnp

from ondevice_rl.networks import ACTIVATIONS
from ondevice_rl.ranges import (  # noqa: F401  (re-exported for the learners)
    MAX_INT,
    NON_NEGATIVE,
    POSITIVE,
    UNIT,
    Range,
)


class TrainOutput(NamedTuple):
    state: Any
    metrics: dict  # name -> [num_updates] float32 (leading population axes under vmap)


def scan_updates(update: Callable) -> Callable:
    """``run(state, hp, env_params=None, num_updates=1) -> (state, metrics)``:
    ``num_updates`` (static) calls of ``update(state, hp, env_params)`` in one
    ``lax.scan``; metrics get a leading ``[num_updates]`` axis."""

    def run(state, hp, env_params=None, num_updates=1):
        def body(state, _):
            return update(state, hp, env_params)

        return jax.lax.scan(body, state, None, length=num_updates)

    return run


def whole_run(trainer: "Trainer") -> Callable[..., TrainOutput]:
    """``train(key, hyperparams, env_params=None) -> TrainOutput``: ``init``
    then every update of ``trainer.config`` in one ``run``; pure, safe to
    ``jax.jit`` and ``jax.vmap``."""

    def train(key, hyperparams, env_params=None) -> TrainOutput:
        state = trainer.init(key, hyperparams, env_params)
        num_updates = trainer.config.num_updates
        state, metrics = trainer.run(state, hyperparams, env_params, num_updates)
        return TrainOutput(state, metrics)

    return train


class Trainer(Protocol):
    """What generic code uses of ``make_trainer(config)``."""

    config: Any
    env: Any
    default_env_params: Any
    init: Callable  # (key, hp, env_params=None) -> state
    run: Callable  # (state, hp, env_params=None, num_updates=1) -> (state, metrics)


class AlgorithmConfig:
    """Behaviour shared by the algorithms' frozen config dataclasses.

    A subclass sets ``HYPERPARAMS`` (its NamedTuple of traced scalars, whose
    field names are also config fields holding the defaults), ``RANGES``
    (field -> ``Range``), ``POSITIVE_INTS`` (int fields that must be ≥ 1),
    and defines ``num_envs``, ``num_updates``, ``steps_per_update`` (env
    steps per update: the metrics' x axis) and ``learn_batch_size`` (samples
    per gradient step: sizes activations in the memory rule).
    """

    HYPERPARAMS: ClassVar[type]
    RANGES: ClassVar[Mapping[str, Range]]
    POSITIVE_INTS: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self):
        name = type(self).__name__
        for field in self.POSITIVE_INTS:
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(
                    f"{name}.{field} must be a positive int, got {value!r}"
                )
            if value >= MAX_INT and field != "total_timesteps":
                raise ValueError(f"{name}.{field}={value} is too large (< 2^31)")
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(field.default, bool) and not isinstance(value, bool):
                raise ValueError(f"{name}.{field.name} must be a bool, got {value!r}")
        object.__setattr__(self, "hidden", tuple(self.hidden))
        if any(
            isinstance(w, bool) or not isinstance(w, int) or not 0 < w < MAX_INT
            for w in self.hidden
        ):
            raise ValueError(
                f"{name}.hidden must be positive ints, got {self.hidden!r}"
            )
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"{name}.activation must be one of {', '.join(ACTIVATIONS)}, "
                f"got {self.activation!r}"
            )
        for field in self.HYPERPARAMS._fields:
            self.RANGES[field].check(f"{name}.{field}", getattr(self, field))
        self.validate()
        if self.steps_per_update >= MAX_INT:
            raise ValueError(
                f"{name}: {self.steps_per_update} env steps per update is too large "
                "(< 2^31)"
            )
        if self.num_updates < 1:
            raise ValueError(
                f"{name}: total_timesteps={self.total_timesteps} is less than one "
                f"update ({self.steps_per_update} env steps)"
            )

    def validate(self) -> None:
        """Algorithm-specific checks (divisibility, ...); raise ValueError."""

    @property
    def hyperparams(self):
        """The traced hyperparameters, float32 scalars."""
        return self.HYPERPARAMS(
            **{k: jnp.float32(getattr(self, k)) for k in self.HYPERPARAMS._fields}
        )

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


class RolloutSizes:
    """Sizes of a learner whose update is one rollout of ``num_envs ×
    num_steps`` env steps, learned on as one batch (mix into the config)."""

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def num_updates(self) -> int:
        return self.total_timesteps // self.batch_size

    @property
    def steps_per_update(self) -> int:
        return self.batch_size

    @property
    def learn_batch_size(self) -> int:
        return self.batch_size


class MinibatchSizes(RolloutSizes):
    """``RolloutSizes`` learned on in ``num_minibatches`` minibatches."""

    @property
    def minibatch_size(self) -> int:
        return self.batch_size // self.num_minibatches

    @property
    def learn_batch_size(self) -> int:
        return self.minibatch_size

    def check_minibatches(self) -> None:
        if self.batch_size % self.num_minibatches:
            raise ValueError(
                f"num_envs * num_steps = {self.batch_size} is not divisible by "
                f"num_minibatches = {self.num_minibatches}"
            )


def hyperparams_from(cls: type, values: Any) -> Any:
    """A ``cls`` NamedTuple of float32 arrays from a sequence of values."""
    return cls(*(jnp.asarray(x, jnp.float32) for x in values))


@dataclasses.dataclass(frozen=True)
class Algorithm:
    """A registry record: everything generic code needs of one learner."""

    name: str
    summary: str  # one line, for help texts and tables
    config: type  # the frozen config dataclass
    make_trainer: Callable[[Any], Trainer]
    make_train: Callable[[Any], Callable[..., TrainOutput]]
    continuous_actions: bool = True  # whether Box action spaces are supported
    #: An on-policy learner whose trainer's ``act`` (stochastic policy) and
    #: ``learn(params, opt_state, traj, key, hp)`` can drive ``bench host``.
    host_loop: bool = False

    @property
    def hyperparams(self) -> type:
        """The NamedTuple class of traced hyperparameters."""
        return self.config.HYPERPARAMS

    @property
    def ranges(self) -> Mapping[str, Range]:
        return self.config.RANGES

    @property
    def hyperparam_fields(self) -> tuple[str, ...]:
        return self.config.HYPERPARAMS._fields

    @property
    def static_fields(self) -> tuple[str, ...]:
        """Config fields that set shapes or loop lengths (``env`` excluded)."""
        traced = set(self.hyperparam_fields)
        return tuple(
            f.name
            for f in dataclasses.fields(self.config)
            if f.name not in traced and f.name != "env"
        )

    def defaults(self) -> dict[str, Any]:
        return {f.name: f.default for f in dataclasses.fields(self.config)}
