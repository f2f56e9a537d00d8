"""Stage 3 of ``check_env``: other params sets through the same compiled rollout.

Besides the defaults (stage 2, ``ondevice_rl.checks.rollouts``), the program
runs with a second time limit (a short one if the rollout outlasts the
default limit, else none within it) and ``random_sets`` random in-range
params (the env's ``PARAM_RANGES``, a shorter time limit). Each rollout gets
``rollout_checks``; ``params_checks`` reports each check once over every
set, then whether ``terminated`` stayed apart from the time limit (the two
time limits, same keys) and whether every set ran in one compiled program.
"""

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.checks.report import CheckResult
from ondevice_rl.checks.rollouts import DefaultRollout, Rollout, rollout_checks
from ondevice_rl.ranges import NON_NEGATIVE, POSITIVE

#: ``params.max_steps`` for "no time limit within the rollout".
NO_LIMIT = 2**30


def params_with(params: Any, **values: Any) -> Any:
    """``params`` with fields replaced (NamedTuple or dataclass), each value
    cast to the dtype of the field it replaces (so the program's input
    types, and its one compilation, stay)."""
    cast = {
        k: jnp.asarray(v, jnp.result_type(getattr(params, k)))
        for k, v in values.items()
    }
    if hasattr(params, "_replace"):
        return params._replace(**cast)
    if hasattr(params, "replace"):
        return params.replace(**cast)
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
    return params_with(defaults, **values)


def random_params(env: Any, defaults: Any, rng: np.random.Generator) -> Any:
    """``scaled_params`` with scales in [0.5, 2] and a time limit fraction in
    [0.01, 1] drawn from ``rng``."""
    scales = list(rng.uniform(0.5, 2.0, size=6))
    return scaled_params(env, defaults, scales, float(rng.uniform(0.01, 1.0)))


def _describe(params: Any) -> str:
    """``max_steps 12, gravity 13.1, ...`` (scalar fields only)."""
    fields = getattr(params, "_fields", ("max_steps",))
    values = [(f, getattr(params, f)) for f in fields]
    numbers = (int, float, np.ndarray, np.number, jax.Array)
    shown = [
        f"{f} {np.asarray(v).item():.4g}"
        for f, v in values
        if isinstance(v, numbers) and np.ndim(v) == 0
    ]
    return ", ".join(shown[:6]) + (", ..." if len(shown) > 6 else "")


def _merge(runs: list[tuple[str, list[CheckResult]]]) -> list[CheckResult]:
    """One result per check over runs: failed where any run failed (naming
    that run's params), else the first run's detail."""
    merged: dict[str, CheckResult] = {}
    count: dict[str, int] = {}
    for label, results in runs:
        for r in results:
            count[r.name] = count.get(r.name, 0) + 1
            labelled = r._replace(detail=f"{r.detail} ({label})")
            if r.name not in merged:
                merged[r.name] = r if r.ok else labelled
            elif merged[r.name].ok and not r.ok:
                merged[r.name] = labelled
    return [
        r._replace(detail=f"{r.detail} ({count[r.name]} params sets)")
        if r.ok and count[r.name] > 1
        else r
        for r in merged.values()
    ]


def _ends(rollouts: list[Rollout]) -> str:
    """How many episodes ended, and how, over ``rollouts``."""
    terminated = sum(int(np.sum(r.steps.terminated)) for r in rollouts)
    truncated = sum(int(np.sum(r.steps.truncated)) for r in rollouts)
    return f"{truncated} truncations, each at max_steps; {terminated} terminations"


def time_limit_apart(long: Rollout, short: Rollout, limit: int) -> CheckResult:
    """``terminated`` must not depend on ``max_steps``: ``long`` and ``short``
    (same keys; ``short`` with ``max_steps = limit``; ``[B, T]`` flags) agree
    on it up to and including ``short``'s first truncation."""
    name = "termination apart from the time limit"
    for env in range(short.steps.truncated.shape[0]):
        cut = np.flatnonzero(short.steps.truncated[env])
        end = int(cut[0]) + 1 if cut.size else short.steps.truncated.shape[1]
        a, b = long.steps.terminated[env, :end], short.steps.terminated[env, :end]
        if np.any(a != b):
            step = int(np.flatnonzero(a != b)[0])
            return CheckResult(
                name,
                False,
                f"env {env}, step {step}: terminated {bool(b[step])} with max_steps "
                f"{limit}, {bool(a[step])} without a time limit (report the limit "
                "as truncated, not terminated)",
            )
    return CheckResult(name, True, f"terminated the same with max_steps {limit}")


def params_checks(
    env: Any, params: Any, default: DefaultRollout, seed: int, random_sets: int
) -> list[CheckResult]:
    """Stage 2's checks merged with those of the other params sets, then
    "termination apart from the time limit" and "params traced".

    Args:
        env, params: the environment and its default params.
        default: stage 2's outcome (its rollout ran).
        seed: of the rollouts' keys and of the random params.
        random_sets: random in-range params sets besides the second limit.
    """
    rollouts = default.rollouts
    runs = [("default params", default.checks)]
    limit = int(params.max_steps)
    if limit > rollouts.num_steps:
        short_limit = max(1, rollouts.num_steps // 4)
        other = params_with(params, max_steps=short_limit)
    else:
        short_limit, other = limit, params_with(params, max_steps=NO_LIMIT)
    ran = [default.rollout, rollouts.run(other, seed)]
    runs.append((_describe(other), rollout_checks(ran[1], other)))
    long, short = ran if limit > rollouts.num_steps else ran[::-1]
    rng = np.random.default_rng(seed)
    for i in range(random_sets):
        sampled = random_params(env, params, rng)
        ran.append(rollouts.run(sampled, seed + 1 + i))
        runs.append((_describe(sampled), rollout_checks(ran[-1], sampled)))
    results = []
    for r in _merge(runs):
        truncation = r.name == "truncation at max_steps" and r.ok
        results.append(r._replace(detail=_ends(ran)) if truncation else r)
    results.append(time_limit_apart(long, short, short_limit))
    compiles = rollouts.program._cache_size()
    results.append(
        CheckResult(
            "params traced",
            compiles == 1,
            f"{len(runs)} params sets, {compiles} compiled program"
            + ("" if compiles == 1 else "s (params must be arrays of fixed dtypes)"),
        )
    )
    return results
