"""Learner configs: static fields that set shapes and loop lengths, and
traced hyperparameters declared once.

A learner's config is a frozen dataclass made by ``learner_config`` on top of
``LearnerConfig`` (plus a sizes mixin). A traced hyperparameter is one line,
``gamma: float = traced(0.99, UNIT, "discount")``: its default, its valid
range and its help text. ``learner_config`` reads those fields and gives the
class ``HYPERPARAMS`` (a NamedTuple of float32 leaves, so sweeping them never
recompiles) and ``RANGES``; ``config.hyperparams`` is the default values.
``config_from_dict`` builds a learner's config from field values read from
a file or a flag (recipes, run directories, ``--set``), checked and coerced.
"""

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.nn.networks import ACTIVATIONS
from ondevice_rl.nn.precision import DEFAULT_MATMUL_PRECISION, MATMUL_PRECISIONS
from ondevice_rl.nn.recurrent import MEMORY_KINDS
from ondevice_rl.ranges import (  # noqa: F401  (re-exported for the learners)
    MAX_INT,
    NON_NEGATIVE,
    POSITIVE,
    UNIT,
    Range,
)
from ondevice_rl.train.kit.protocol import Algorithm
from ondevice_rl.train.kit.schedules import LR_SCHEDULES

_TRACED = "traced_range"


def traced(default: float, valid: Range, help: str) -> Any:
    """Declares a traced hyperparameter: a float32 leaf of ``hyperparams``
    (sweeps vary it without recompiling) with its default, range and help."""
    return dataclasses.field(default=default, metadata={_TRACED: valid, "help": help})


def learner_config(cls: type) -> type:
    """``dataclass(frozen=True)`` that also sets ``cls.HYPERPARAMS`` (a
    NamedTuple ``Hyperparams`` of the ``traced`` fields, in declaration order)
    and ``cls.RANGES`` (field -> ``Range``).

    A traced field declared in a base class stays traced when a learner
    gives it another default with a plain ``name: float = value`` line.
    """
    inherited = {}
    for base in cls.__mro__[1:]:
        if dataclasses.is_dataclass(base):
            for f in dataclasses.fields(base):
                inherited.setdefault(f.name, f)
    for name in cls.__dict__.get("__annotations__", {}):
        value = cls.__dict__.get(name, dataclasses.MISSING)
        base = inherited.get(name)
        if base is not None and _TRACED in base.metadata:
            if not isinstance(value, dataclasses.Field):
                setattr(
                    cls, name, dataclasses.field(default=value, metadata=base.metadata)
                )
    cls = dataclasses.dataclass(frozen=True)(cls)
    fields = [f for f in dataclasses.fields(cls) if _TRACED in f.metadata]
    hyperparams = NamedTuple("Hyperparams", [(f.name, jax.Array) for f in fields])
    hyperparams.__module__ = cls.__module__
    hyperparams.__doc__ = (
        f"{cls.__name__}'s scalar coefficients, traced float32 leaves: sweeping "
        "them never recompiles. Leaves may carry a leading population axis "
        "``[P]`` under ``jax.vmap``."
    )
    cls.HYPERPARAMS = hyperparams
    cls.RANGES = {f.name: f.metadata[_TRACED] for f in fields}
    return cls


def field_help(cls: type, name: str) -> str | None:
    """The help text of ``cls``'s traced field ``name`` (None for others)."""
    return {f.name: f.metadata.get("help") for f in dataclasses.fields(cls)}.get(name)


@dataclasses.dataclass(frozen=True)
class LearnerConfig:
    """Fields every learner has; subclasses add theirs and set their
    defaults.

    Every ``int`` field must be a positive int below 2^31 (``total_timesteps``
    may be larger) unless listed in ``ZERO_ALLOWED`` (checked by the learner).
    A subclass defines ``num_updates``, ``steps_per_update`` (env steps per
    update: the metrics' x axis) and ``learn_batch_size`` (samples per
    gradient step: sizes activations in the memory rule).
    """

    HYPERPARAMS: ClassVar[type]
    RANGES: ClassVar[Mapping[str, Range]]
    ZERO_ALLOWED: ClassVar[tuple[str, ...]] = ()
    #: str fields and their valid values.
    CHOICES: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "activation": tuple(ACTIVATIONS),
        "lr_schedule": LR_SCHEDULES,
        "matmul_precision": MATMUL_PRECISIONS,
    }

    env: str = "CartPole-v1"
    total_timesteps: int = 500_000
    num_envs: int = 4
    hidden: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    #: Learning rate over the run: "constant", "linear" (to 0) or "cosine".
    lr_schedule: str = "constant"
    #: Precision of every matmul and convolution (``ondevice_rl.nn.precision``):
    #: "highest" (float32 on every platform), "high" or "default" (TF32 on
    #: GPUs that have it, bfloat16 passes on TPU). Static: it changes the
    #: program; on CPU all three give the same one.
    matmul_precision: str = DEFAULT_MATMUL_PRECISION
    learning_rate: float = traced(2.5e-4, POSITIVE, "optimiser step size")
    gamma: float = traced(0.99, UNIT, "discount")
    max_grad_norm: float = traced(0.5, POSITIVE, "global-norm gradient clip")

    def __post_init__(self):
        name = type(self).__name__
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.type is not int or field.name in self.ZERO_ALLOWED:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(
                    f"{name}.{field.name} must be a positive int, got {value!r}"
                )
            if value >= MAX_INT and field.name != "total_timesteps":
                raise ValueError(f"{name}.{field.name}={value} is too large (< 2^31)")
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
        for field, known in self.CHOICES.items():
            if getattr(self, field) not in known:
                raise ValueError(
                    f"{name}.{field} must be one of {', '.join(known)}, "
                    f"got {getattr(self, field)!r}"
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
        if self.num_updates >= MAX_INT:  # update counters are int32
            raise ValueError(
                f"{name}: total_timesteps={self.total_timesteps} is "
                f"{self.num_updates} updates, too many (< 2^31)"
            )

    def validate(self) -> None:
        """Learner-specific checks (divisibility, ...); raise ValueError."""

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


@dataclasses.dataclass(frozen=True)
class OnPolicyConfig(LearnerConfig):
    """Fields of the learners whose update learns on its own rollout."""

    CHOICES = {**LearnerConfig.CHOICES, "memory": ("none", *MEMORY_KINDS)}

    num_steps: int = 128
    #: A recurrent core between the observation and the heads: "none", "gru"
    #: or "lstm" of ``memory_size`` units (``ondevice_rl.nn.recurrent``).
    memory: str = "none"
    memory_size: int = 128
    #: Standardise observations by running statistics kept in the train state
    #: (``ondevice_rl.normalize``), and scale rewards by the running std of
    #: the discounted return. Off: results identical to before they existed.
    normalize_obs: bool = False
    normalize_rewards: bool = False


@dataclasses.dataclass(frozen=True)
class ActorCriticConfig(OnPolicyConfig):
    """Fields of the actor-critic learners (PPO, A2C). ``normalize_advantages``
    (static) standardises the advantages of each batch or minibatch before
    the policy gradient."""

    normalize_advantages: bool = True
    gae_lambda: float = traced(0.95, UNIT, "GAE's λ")
    ent_coef: float = traced(0.01, NON_NEGATIVE, "entropy bonus weight")
    vf_coef: float = traced(0.5, NON_NEGATIVE, "value loss weight")


@dataclasses.dataclass(frozen=True)
class EpsilonGreedyFields:
    """ε-greedy exploration (DQN, PQN), scheduled in env steps: linear from
    ``eps_start`` to ``eps_end`` over ``exploration_steps``, then constant."""

    exploration_steps: int = 100_000
    eps_start: float = traced(1.0, UNIT, "ε of ε-greedy at env step 0")
    eps_end: float = traced(0.05, UNIT, "ε once exploration_steps have passed")


class RolloutSizes:
    """Sizes of a learner whose update is one rollout of ``num_envs ×
    num_steps`` env steps, learned on as one batch (mix into the config)."""

    update_epochs = 1
    num_minibatches = 1

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
        return self.batch_size // self.num_minibatches

    @property
    def minibatch_size(self) -> int:
        return self.batch_size // self.num_minibatches

    def check_minibatches(self) -> None:
        if self.batch_size % self.num_minibatches:
            raise ValueError(
                f"num_envs * num_steps = {self.batch_size} is not divisible by "
                f"num_minibatches = {self.num_minibatches}"
            )
        memory = getattr(self, "memory", "none")
        if memory != "none" and self.num_envs % self.num_minibatches:
            raise ValueError(  # a minibatch is whole envs' sequences
                f"with memory={memory!r}, num_envs = {self.num_envs} is not "
                f"divisible by num_minibatches = {self.num_minibatches}"
            )


def hyperparams_from(cls: type, values: Any) -> Any:
    """A ``cls`` NamedTuple of float32 arrays from a sequence of values."""
    return cls(*(jnp.asarray(x, jnp.float32) for x in values))


def _coerce(name: str, value, default: Any, where: str):
    bad = ValueError(f"{where}: {name} must be {type(default).__name__}, got {value!r}")
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise bad
    elif isinstance(default, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad
    elif isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise bad
        value = float(value)
    elif isinstance(default, tuple):
        if not isinstance(value, list | tuple) or not all(
            isinstance(x, int) and not isinstance(x, bool) for x in value
        ):
            raise ValueError(f"{where}: {name} must be a list of ints, got {value!r}")
        value = tuple(value)
    elif not isinstance(value, type(default)):
        raise bad
    return value


def config_from_dict(values: dict, algorithm: Algorithm, where: str = "config") -> Any:
    """``algorithm``'s config from a mapping of its field names (checked and
    coerced).

    Raises:
        ValueError: unknown key (the message lists the valid ones), wrong type,
            or a value the config rejects.
    """
    defaults = algorithm.defaults()
    unknown = sorted(set(values) - set(defaults))
    if unknown:
        raise ValueError(
            f"{where}: unknown key(s) {', '.join(unknown)} for {algorithm.name}; "
            f"valid keys: {', '.join(defaults)}"
        )
    fields = {k: _coerce(k, v, defaults[k], where) for k, v in values.items()}
    try:
        return algorithm.config(**fields)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
