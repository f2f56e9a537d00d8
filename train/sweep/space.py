"""What a sweep may search: value specs on the host, the same space as
arrays on the device.

A search maps field names to values: a list (grid values), ``Uniform(lo,
hi)`` / ``LogUniform(lo, hi)`` (random draws, ``plan.py``) or a scalar (one
fixed value). ``SearchSpace.build(config, search)`` reads the searched
hyperparameters once more as arrays, for strategies that sample and perturb
them inside a jitted program. Every hyperparameter of the learner's
``Hyperparams`` gets one row:

* ``FIXED``: not searched, the base config's value;
* ``UNIFORM`` / ``LOG_UNIFORM``: a range ``[low, high]`` (``log`` of the
  bounds for the latter);
* ``CHOICE``: one of ``choices`` (a list's values, sorted).

``sample(space, base, key)`` draws a fresh setting; ``explore(space, hp,
key, ...)`` perturbs one as population-based training does: each searched
value is resampled with probability ``resample_prob``, else multiplied by one
of ``factors`` (a range) or moved to a neighbouring choice (a list), and kept
within its range. Search ranges are checked against the learner's declared
ranges before anything runs (``build_plan``), so explored values stay valid.
Both work on one member; the caller vmaps.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

FIXED, UNIFORM, LOG_UNIFORM, CHOICE = range(4)
#: ``choices`` columns come in multiples of this: lists of up to 8 values
#: share one compiled program.
CHOICE_WIDTH = 8


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


def shortest(value: float) -> float:
    """The float32 nearest ``value``, written with the fewest digits
    (``0.99``, not ``0.9900000095367432``)."""
    return float(str(np.float32(value)))


class SearchSpace(NamedTuple):
    """One row per hyperparameter (``Hyperparams._fields`` order)."""

    kind: np.ndarray  # [H] int32: FIXED, UNIFORM, LOG_UNIFORM or CHOICE
    low: np.ndarray  # [H] float32: range bounds (log bounds for LOG_UNIFORM)
    high: np.ndarray  # [H] float32
    choices: np.ndarray  # [H, C] float32: a list's values, last one repeated
    num_choices: np.ndarray  # [H] int32

    @classmethod
    def build(cls, config: Any, search: Mapping[str, Any]) -> "SearchSpace":
        """The space of ``search`` over ``config``'s hyperparameters
        (``SweepSpecError`` for a field that is not one)."""
        fields = config.HYPERPARAMS._fields
        for name in search:
            if name not in fields:
                raise SweepSpecError(
                    f"{name} is not a traced hyperparameter; a search strategy "
                    f"explores these only: {', '.join(fields)}"
                )
        longest = max([len(v) for v in search.values() if isinstance(v, list)] or [1])
        width = -(-longest // CHOICE_WIDTH) * CHOICE_WIDTH  # shared by most lists
        kind = np.full(len(fields), FIXED, np.int32)
        low = np.zeros(len(fields), np.float32)
        high = np.zeros(len(fields), np.float32)
        choices = np.zeros((len(fields), width), np.float32)
        num_choices = np.ones(len(fields), np.int32)
        for i, name in enumerate(fields):
            spec = search.get(name)
            if isinstance(spec, Uniform):
                kind[i], low[i], high[i] = UNIFORM, spec.low, spec.high
            elif isinstance(spec, LogUniform):
                kind[i] = LOG_UNIFORM
                low[i], high[i] = np.log(spec.low), np.log(spec.high)
            elif isinstance(spec, list | tuple) and len(spec) > 1:
                values = np.sort(np.asarray(spec, np.float32))
                kind[i], num_choices[i] = CHOICE, len(values)
                choices[i] = np.concatenate(
                    [values, np.full(width - len(values), values[-1])]
                )
        return cls(kind, low, high, choices, num_choices)

    @property
    def searched(self) -> np.ndarray:
        """``[H]`` bool: the hyperparameters this space varies."""
        return self.kind != FIXED


def _as_vector(hp: Any) -> jax.Array:
    return jnp.stack([jnp.asarray(x, jnp.float32) for x in hp])


def _from_vector(hp: Any, vector: jax.Array) -> Any:
    return type(hp)(*(vector[i] for i in range(len(hp))))


def _draw(space: SearchSpace, key: jax.Array) -> jax.Array:
    """``[H]``: a value of every row drawn afresh (FIXED rows: garbage)."""
    unit_key, choice_key = jax.random.split(key)
    u = jax.random.uniform(unit_key, space.kind.shape)
    ranged = space.low + u * (space.high - space.low)
    index = jax.random.randint(choice_key, space.kind.shape, 0, space.num_choices)
    picked = jnp.take_along_axis(jnp.asarray(space.choices), index[:, None], 1)[:, 0]
    kind = jnp.asarray(space.kind)
    return jnp.where(
        kind == LOG_UNIFORM,
        jnp.exp(ranged),
        jnp.where(kind == CHOICE, picked, ranged),
    )


def sample(space: SearchSpace, base: Any, key: jax.Array) -> Any:
    """A fresh setting: searched values drawn, the others ``base``'s."""
    fresh = _draw(space, key)
    vector = jnp.where(jnp.asarray(space.searched), fresh, _as_vector(base))
    return _from_vector(base, vector)


def explore(
    space: SearchSpace,
    hp: Any,
    key: jax.Array,
    resample_prob: float,
    factors: tuple[float, float] = (0.8, 1.25),
) -> Any:
    """``hp`` perturbed: each searched value resampled with probability
    ``resample_prob``, else scaled by one of ``factors`` (ranges; clipped to
    the range) or moved one choice down or up (lists; kept in the list)."""
    draw_key, coin_key, side_key = jax.random.split(key, 3)
    shape = space.kind.shape
    value = _as_vector(hp)
    kind = jnp.asarray(space.kind)
    up = jax.random.bernoulli(side_key, 0.5, shape)
    scaled = value * jnp.where(up, factors[1], factors[0])
    lin_low = jnp.where(kind == LOG_UNIFORM, jnp.exp(space.low), space.low)
    lin_high = jnp.where(kind == LOG_UNIFORM, jnp.exp(space.high), space.high)
    scaled = jnp.clip(scaled, lin_low, lin_high)
    choices = jnp.asarray(space.choices)
    position = jnp.argmin(jnp.abs(choices - value[:, None]), axis=1)
    moved = jnp.clip(position + jnp.where(up, 1, -1), 0, space.num_choices - 1)
    neighbour = jnp.take_along_axis(choices, moved[:, None], 1)[:, 0]
    perturbed = jnp.where(kind == CHOICE, neighbour, scaled)
    resample = jax.random.bernoulli(coin_key, resample_prob, shape)
    new = jnp.where(resample, _draw(space, draw_key), perturbed)
    return _from_vector(hp, jnp.where(jnp.asarray(space.searched), new, value))
