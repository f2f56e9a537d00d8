"""Params for the checks: the defaults with fields replaced, and random
in-range values (the env's ``PARAM_RANGES``, a shorter time limit)."""

from typing import Any

import jax.numpy as jnp
import numpy as np

from ondevice_rl.ranges import NON_NEGATIVE, POSITIVE


def replace_params(params: Any, **values: Any) -> Any:
    """``params`` with fields replaced (NamedTuple or dataclass), each value
    cast to the dtype of the field it replaces."""
    cast = {
        k: jnp.asarray(v, jnp.result_type(getattr(params, k)))
        for k, v in values.items()
    }
    if hasattr(params, "_replace"):
        return params._replace(**cast)
    if hasattr(params, "replace"):
        return params.replace(**cast)
    import dataclasses

    return dataclasses.replace(params, **cast)


def scaled_params(
    env: Any, defaults: Any, scales: list[float], limit_fraction: float
) -> Any:
    """In-range params: the defaults, positive (or non-negative) scalar
    physics fields (``env.PARAM_RANGES``) multiplied by ``scales`` (in [0.5,
    2], cycled), the time limit cut to ``limit_fraction`` of the default (at
    least 1); checked by ``env.check_params`` where the env has it."""
    ranges = getattr(env, "PARAM_RANGES", {})
    fields = getattr(defaults, "_fields", None) or list(ranges)
    values = {"max_steps": max(1, int(int(defaults.max_steps) * limit_fraction))}
    for i, field in enumerate(fields):
        value = getattr(defaults, field, None)
        if field == "max_steps" or value is None or np.ndim(value) != 0:
            continue
        if ranges.get(field) in (POSITIVE, NON_NEGATIVE):
            values[field] = float(value) * scales[i % len(scales)]
    if hasattr(env, "check_params"):
        values = env.check_params(values)
    return replace_params(defaults, **values)


def random_params(env: Any, defaults: Any, rng: np.random.Generator) -> Any:
    """``scaled_params`` with scales in [0.5, 2] and a time limit fraction in
    [0.01, 1] drawn from ``rng``."""
    scales = list(rng.uniform(0.5, 2.0, size=6))
    return scaled_params(env, defaults, scales, float(rng.uniform(0.01, 1.0)))
