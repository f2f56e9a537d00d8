"""Valid values of scalar settings: learners' hyperparameters and envs'
physics.

``Range(low, high, low_open, high_open).check(name, value)`` returns the
value as a float or raises a one-line ValueError naming the setting, the
value and the range. Non-finite values are never valid.
"""

import math
from typing import Any, NamedTuple

#: Sizes, counts and time limits stay below this (XLA's int32 dimensions).
MAX_INT = 2**31
#: The largest float32: scalars are traced as float32, beyond it inf.
FLOAT32_MAX = 3.4028234663852886e38


class Range(NamedTuple):
    """Valid values of a scalar (finite, and in these bounds)."""

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False  # low itself excluded
    high_open: bool = False

    def __str__(self) -> str:
        lo, hi = "(" if self.low_open else "[", ")" if self.high_open else "]"
        return f"{lo}{self.low:g}, {self.high:g}{hi}"

    def check(self, name: str, value: Any) -> float:
        """``value`` as a float, or ValueError naming ``name``, the value and
        the range."""
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: {value!r} is not a number") from None
        above = number > self.low if self.low_open else number >= self.low
        below = number < self.high if self.high_open else number <= self.high
        if not math.isfinite(number):
            raise ValueError(f"{name}={value!r} is not finite (allowed: {self})")
        if abs(number) > FLOAT32_MAX:
            raise ValueError(f"{name}={value!r} is beyond float32 (allowed: {self})")
        if not (above and below):
            raise ValueError(f"{name}={value!r} is outside {self}")
        return number


POSITIVE = Range(0.0, math.inf, low_open=True)
NON_NEGATIVE = Range(0.0)
UNIT = Range(0.0, 1.0)
FINITE = Range()
TIME_LIMIT = Range(1, MAX_INT - 1)
