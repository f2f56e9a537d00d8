"""Step 1 of the reference comparison: the port's spaces against the
reference's, and the port's actions in the reference's format.

A reference space with ``n`` is discrete (gymnasium's ``Discrete``, starting
at 0); any other has a ``shape``, ``low`` and ``high`` (gymnasium's ``Box``),
bounds at float32's largest value counting as infinite.
"""

from typing import Any

import numpy as np

from ondevice_rl.checks.report import CheckResult, describe_space
from ondevice_rl.checks.static import is_space
from ondevice_rl.env.spaces import Box, Discrete

_F32_MAX = float(np.finfo(np.float32).max)


def _bounds(x: Any, shape: tuple) -> np.ndarray:
    """Bounds as float64 ``[*shape]``, ±float32-max and beyond as ±inf."""
    x = np.broadcast_to(np.asarray(x, np.float64), shape).copy()
    x[np.abs(x) >= _F32_MAX] = np.copysign(np.inf, x[np.abs(x) >= _F32_MAX])
    return x


def _space_problem(ours: Any, theirs: Any, what: str) -> str | None:
    mine = describe_space(ours) if is_space(ours) else type(ours).__name__
    if hasattr(theirs, "n"):
        if not isinstance(ours, Discrete) or int(ours.n) != int(theirs.n):
            return f"{what} space is {mine}, the reference's Discrete({theirs.n})"
        if int(getattr(theirs, "start", 0)) != 0:
            return f"the reference's {what} space starts at {theirs.start}, ours at 0"
        return None
    shape = tuple(getattr(theirs, "shape", ()) or ())
    if not isinstance(ours, Box) or tuple(ours.shape) != shape:
        return f"{what} space is {mine}, the reference's has shape {list(shape)}"
    for side in ("low", "high"):
        a = _bounds(getattr(ours, side), shape)
        b = _bounds(getattr(theirs, side), shape)
        if not np.allclose(a, b, rtol=1e-6, equal_nan=True):
            return (
                f"{what} space's {side} is {a.tolist()}, the reference's {b.tolist()}"
            )
    return None


def compare_spaces(env: Any, params: Any, reference_env: Any) -> CheckResult:
    """Action and observation spaces equal to the reference's (bounds at
    float32's largest value count as infinite)."""
    obs_space = env.observation_space(params)
    problem = _space_problem(
        env.action_space(params), reference_env.action_space, "action"
    )
    if problem is None and is_space(obs_space):
        ref = reference_env.observation_space
        problem = _space_problem(obs_space, ref, "observation")
    return CheckResult("spaces match the reference", problem is None, problem or "yes")


def reference_action(action: np.ndarray, space: Any) -> Any:
    """The port's action in the reference's format (int for a discrete space)."""
    if hasattr(space, "n"):
        return int(action)
    shape = getattr(space, "shape", None) or np.shape(action)
    dtype = getattr(space, "dtype", None) or np.float32
    return np.asarray(action, dtype).reshape(shape)
