"""A port against its reference (gymnasium) environment: spaces, the reset
distribution, and ``check_conformance``'s step-by-step comparison.

The conformance comparison syncs the reference to the port's state before
every step, so it never sees how episodes *start*: ``reset_distribution``
draws many resets from both and tests that they come from one distribution
(per observation entry, the two-sample Kolmogorov-Smirnov test and
Rosenbaum's test of the support's edges; a chi-square test over the distinct
observations when there are few of them, as in a grid world).

The reference is any gymnasium-style env (``reset(seed=)``, ``step``,
``action_space``, ``observation_space``); nothing here imports gymnasium.
"""

import math
from typing import Any

import jax
import numpy as np

from ondevice_rl.checks.conformance import SyncFn, check_conformance
from ondevice_rl.checks.report import CheckResult, describe_space
from ondevice_rl.checks.static import is_space
from ondevice_rl.env.spaces import Box, Discrete

#: A port whose p-value (Bonferroni-corrected) is below this fails.
ALPHA = 1e-4
#: Categories with fewer draws than this (both samples) are pooled.
MIN_CATEGORY = 10
_F32_MAX = float(np.finfo(np.float32).max)


def _bounds(x: Any, shape: tuple) -> np.ndarray:
    """Bounds as float64 ``[*shape]``, ±float32-max and beyond as ±inf."""
    x = np.broadcast_to(np.asarray(x, np.float64), shape).copy()
    x[np.abs(x) >= _F32_MAX] = np.copysign(np.inf, x[np.abs(x) >= _F32_MAX])
    return x


def _space_problem(ours: Any, theirs: Any, what: str) -> str | None:
    if hasattr(theirs, "n"):
        if not isinstance(ours, Discrete) or int(ours.n) != int(theirs.n):
            mine = describe_space(ours) if is_space(ours) else type(ours).__name__
            return f"{what} space is {mine}, the reference's Discrete({theirs.n})"
        if int(getattr(theirs, "start", 0)) != 0:
            return f"the reference's {what} space starts at {theirs.start}, ours at 0"
        return None
    shape = tuple(getattr(theirs, "shape", ()) or ())
    if not isinstance(ours, Box) or tuple(ours.shape) != shape:
        mine = describe_space(ours) if is_space(ours) else type(ours).__name__
        return f"{what} space is {mine}, the reference's has shape {list(shape)}"
    for side in ("low", "high"):
        a, b = (
            _bounds(getattr(ours, side), shape),
            _bounds(getattr(theirs, side), shape),
        )
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


def reset_samples(env: Any, params: Any, reference_env: Any, n: int, seed: int):
    """``(ours [n, D], theirs [n, D])``: first observations, flattened."""
    keys = jax.random.split(jax.random.key(seed), n)
    ours = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(keys, params)[0]
    ours = np.asarray(ours, np.float64).reshape(n, -1)
    first = reference_env.reset(seed=seed)[0]
    theirs = [first] + [reference_env.reset()[0] for _ in range(n - 1)]
    return ours, np.asarray(np.stack(theirs), np.float64).reshape(n, -1)


def _chi_square_p(ours: np.ndarray, theirs: np.ndarray) -> float:
    """p-value of one categorical distribution over the distinct rows."""
    from scipy.stats import chi2_contingency

    rows, index = np.unique(np.concatenate([ours, theirs]), axis=0, return_inverse=True)
    index = index.reshape(-1)
    counts = np.zeros((2, len(rows)))
    np.add.at(counts[0], index[: len(ours)], 1)
    np.add.at(counts[1], index[len(ours) :], 1)
    rare = counts.sum(0) < MIN_CATEGORY
    table = np.concatenate([counts[:, ~rare], counts[:, rare].sum(1, keepdims=True)], 1)
    table = table[:, table.sum(0) > 0]
    if table.shape[1] < 2:
        return 1.0
    return float(chi2_contingency(table)[1])


def _beyond_p(a: np.ndarray, b: np.ndarray) -> float:
    """p-value of as many of ``a`` above ``b``'s maximum as seen, were both
    from one distribution (Rosenbaum's test): the top ``m`` of the pooled
    sample all from ``a``, ``C(len(a), m) / C(len(a) + len(b), m)``."""
    m, n, total = int(np.sum(a > b.max())), len(a), len(a) + len(b)
    log_p = sum(math.log((n - i) / (total - i)) for i in range(m))
    return math.exp(log_p)


def _column_p(a: np.ndarray, b: np.ndarray) -> float:
    """Lowest p-value (times the 5 tests) of one observation entry: the KS
    test, and Rosenbaum's on each side of each sample (support edges)."""
    from scipy.stats import ks_2samp

    if np.ptp(a) == 0 and np.ptp(b) == 0 and a[0] == b[0]:
        return 1.0
    tails = (_beyond_p(a, b), _beyond_p(b, a), _beyond_p(-a, -b), _beyond_p(-b, -a))
    return min(1.0, 5 * min(float(ks_2samp(a, b)[1]), *tails))


def reset_distribution(
    env: Any, params: Any, reference_env: Any, num_samples: int = 2000, seed: int = 0
) -> CheckResult:
    """Whether the port's resets and the reference's come from one
    distribution (p-value below ``ALPHA``, Bonferroni-corrected, fails)."""
    name = "reset distribution"
    if not is_space(env.observation_space(params)):
        return CheckResult(name, True, "skipped: pytree observations")
    ours, theirs = reset_samples(env, params, reference_env, num_samples, seed)
    if ours.shape != theirs.shape:
        return CheckResult(
            name,
            False,
            f"the reference's observations have {theirs.shape[1]} entries, ours "
            f"{ours.shape[1]} (map them with a gymnasium wrapper in a reference "
            "factory)",
        )
    distinct = len(np.unique(np.concatenate([ours, theirs]), axis=0))
    if distinct <= num_samples // 4:
        corrected = _chi_square_p(ours, theirs)
        test = f"chi-square over {distinct} values"
    else:
        ps = [_column_p(a, b) for a, b in zip(ours.T, theirs.T, strict=True)]
        column = int(np.argmin(ps))
        corrected = min(1.0, ps[column] * ours.shape[1])
        test = f"KS and support edges per entry, lowest at obs[{column}]"
    ok = corrected >= ALPHA
    verdict = "same distribution" if ok else "different distributions"
    return CheckResult(
        name,
        ok,
        f"{verdict} ({num_samples} resets each, {test}, p = {corrected:.2g})",
    )


def conformance(
    env: Any,
    params: Any,
    reference_env: Any,
    sync_state: SyncFn,
    num_steps: int = 2000,
    seed: int = 0,
) -> CheckResult:
    """``check_conformance`` as one line (the first mismatches if any)."""
    report = check_conformance(
        env,
        reference_env,
        sync_state=sync_state,
        params=params,
        num_steps=num_steps,
        seed=seed,
    )
    lines = str(report).splitlines()
    detail = lines[0] if report.ok else "; ".join(x.strip() for x in lines[:3])
    return CheckResult("conformance", report.ok, detail)
