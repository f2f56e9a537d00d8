"""Step 2 of the reference comparison: the reset distribution.

Step 3 (``steps``) syncs the reference to the port's state before every
step, so it never sees how episodes *start*: ``reset_distribution`` draws
many resets from both, ``[n, D]`` flattened observations each, and tests
that they come from one distribution. Few distinct observations (a grid
world): a chi-square test over them. Otherwise, per entry, the two-sample
Kolmogorov-Smirnov test and Rosenbaum's test of the support's edges (as many
of one sample beyond the other's maximum, or minimum, as seen),
Bonferroni-corrected over the tests and the entries.
"""

import math
from typing import Any

import jax
import numpy as np

from ondevice_rl.checks.report import CheckResult
from ondevice_rl.checks.static import is_space

#: A port whose p-value (Bonferroni-corrected) is below this fails.
ALPHA = 1e-4
#: Categories with fewer draws than this (both samples) are pooled.
MIN_CATEGORY = 10


def _chi_square_p(index: np.ndarray, n_ours: int, distinct: int) -> float:
    """p-value of one categorical distribution over the distinct rows:
    ``index`` ``[n_ours + n_theirs]`` each row's value, ours first."""
    from scipy.stats import chi2_contingency

    counts = np.zeros((2, distinct))
    np.add.at(counts[0], index[:n_ours], 1)
    np.add.at(counts[1], index[n_ours:], 1)
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
    """Lowest p-value (times the 5 tests) of one observation entry (``[n]``
    each): the KS test, and Rosenbaum's on each side of each sample."""
    from scipy.stats import ks_2samp

    if np.ptp(a) == 0 and np.ptp(b) == 0 and a[0] == b[0]:
        return 1.0
    tails = (_beyond_p(a, b), _beyond_p(b, a), _beyond_p(-a, -b), _beyond_p(-b, -a))
    return min(1.0, 5 * min(float(ks_2samp(a, b)[1]), *tails))


def one_distribution_p(ours: np.ndarray, theirs: np.ndarray) -> tuple[float, str]:
    """``(p-value, the test named)`` of ``ours`` and ``theirs`` (``[n, D]``
    float64 each) drawn from one distribution, corrected for the tests run."""
    values, index = np.unique(
        np.concatenate([ours, theirs]), axis=0, return_inverse=True
    )
    distinct = len(values)
    if distinct <= len(ours) // 4:
        p = _chi_square_p(index.reshape(-1), len(ours), distinct)
        return p, f"chi-square over {distinct} values"
    ps = [_column_p(a, b) for a, b in zip(ours.T, theirs.T, strict=True)]
    column = int(np.argmin(ps))
    corrected = min(1.0, ps[column] * ours.shape[1])
    return corrected, f"KS and support edges per entry, lowest at obs[{column}]"


def reset_samples(env: Any, params: Any, reference_env: Any, n: int, seed: int):
    """``(ours [n, D], theirs [n, D])``: first observations, flattened."""
    keys = jax.random.split(jax.random.key(seed), n)
    ours = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(keys, params)[0]
    ours = np.asarray(ours, np.float64).reshape(n, -1)
    first = reference_env.reset(seed=seed)[0]
    theirs = [first] + [reference_env.reset()[0] for _ in range(n - 1)]
    return ours, np.asarray(np.stack(theirs), np.float64).reshape(n, -1)


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
    p, test = one_distribution_p(ours, theirs)
    ok = p >= ALPHA
    verdict = "same distribution" if ok else "different distributions"
    return CheckResult(
        name, ok, f"{verdict} ({num_samples} resets each, {test}, p = {p:.2g})"
    )
