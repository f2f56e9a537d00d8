"""Scores over seeds as rliable defines them (Agarwal et al., 2021).

* ``iqm(x)``: the interquartile mean, the mean of the middle 50% of the runs
  (``scipy.stats.trim_mean(x, 0.25)`` over every score, as rliable's
  ``aggregate_iqm``);
* ``interval_estimates(scores)``: per name, the IQM and its stratified
  bootstrap 95% confidence interval (runs resampled with replacement within
  each task, percentile method);
* ``plot_performance_profiles(scores, path)``: the fraction of runs scoring
  above each threshold τ (rliable's score distributions), with its
  bootstrap 95% band;
* ``paired_difference(a, b)``: the mean of ``a - b`` over paired runs (the
  same search seed, say) and its bootstrap 95% CI, runs resampled in pairs.

``scores`` maps a name (a setting, a method) to its runs' scores ``[runs]``
or ``[runs, tasks]``. The bootstrap is vectorised NumPy (rliable 1.2 resamples
in a Python loop: seconds per setting); tests check it against rliable
itself (IQM exactly, interval ends within bootstrap noise). A ``seed`` makes
every interval repeat exactly.
"""

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ondevice_rl.train.services.writes import write_whole

#: Bootstrap resamples behind every interval.
REPS = 2000
CONFIDENCE = 0.95
#: Resampled scores held at once (bounds memory for large populations).
_BLOCK = 1 << 22


def _matrix(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    return x[:, None] if x.ndim == 1 else x.reshape(len(x), -1)


def iqm(x: np.ndarray) -> float:
    """Interquartile mean of runs' scores ``[runs]`` (or ``[runs, tasks]``)."""
    # lazy: scipy.stats is ~0.6 s of the 2.0 s every `ondevice-rl` command imports
    from scipy import stats as scipy_stats

    return float(scipy_stats.trim_mean(_matrix(x), 0.25, axis=None))


def _trimmed_means(samples: np.ndarray) -> np.ndarray:
    """IQM of each row of ``[reps, N]``, as ``trim_mean(row, 0.25)``."""
    n = samples.shape[1]
    cut = int(0.25 * n)
    ordered = np.sort(samples, axis=1)
    return ordered[:, cut : n - cut].mean(axis=1)


def bootstrap_samples(x: np.ndarray, reps: int, rng: np.random.Generator):
    """Yields blocks ``[r, runs * tasks]`` of stratified resamples of ``x``
    ``[runs, tasks]``: each task's runs drawn with replacement."""
    runs, tasks = x.shape
    per_block = max(1, _BLOCK // max(1, runs * tasks))
    for start in range(0, reps, per_block):
        r = min(per_block, reps - start)
        rows = rng.integers(0, runs, size=(r, runs, tasks))
        yield x[rows, np.arange(tasks)].reshape(r, runs * tasks)


def _interval(values: np.ndarray) -> tuple[float, float]:
    tail = 100 * (1 - CONFIDENCE) / 2
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def interval_estimates(
    scores: Mapping[str, np.ndarray], reps: int = REPS, seed: int = 0
) -> dict[str, tuple[float, float, float]]:
    """``{name: (iqm, ci_low, ci_high)}``: each name's IQM and stratified
    bootstrap ``CONFIDENCE`` interval over its runs (runs with a non-finite
    score left out; a name without finite runs gets NaNs)."""
    out = {}
    for k, (name, x) in enumerate(scores.items()):
        x = _matrix(x)
        x = x[np.all(np.isfinite(x), axis=1)]
        if not len(x):
            out[name] = (np.nan, np.nan, np.nan)
            continue
        rng = np.random.default_rng([seed, k])
        boot = np.concatenate(
            [_trimmed_means(s) for s in bootstrap_samples(x, reps, rng)]
        )
        out[name] = (iqm(x), *_interval(boot))
    return out


def paired_difference(
    a: np.ndarray, b: np.ndarray, reps: int = REPS, seed: int = 0
) -> tuple[float, float, float]:
    """``(mean, ci_low, ci_high)`` of ``a - b`` over pairs ``[runs]``
    (pairs with a non-finite side left out; NaNs if none is left)."""
    d = np.asarray(a, np.float64) - np.asarray(b, np.float64)
    d = d[np.isfinite(d)]
    if not len(d):
        return (np.nan, np.nan, np.nan)
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(reps, len(d)))].mean(axis=1)
    return (float(d.mean()), *_interval(means))


def performance_profiles(
    scores: Mapping[str, np.ndarray],
    taus: np.ndarray,
    reps: int = REPS,
    seed: int = 0,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """``(profiles, bands)``: per name, the fraction of runs scoring above
    each ``taus[k]`` ``[K]`` and its bootstrap interval ``[2, K]``."""
    taus = np.asarray(taus, np.float64)
    profiles, bands = {}, {}
    for k, (name, x) in enumerate(scores.items()):
        x = _matrix(x)
        profiles[name] = (x.reshape(-1)[:, None] > taus).mean(axis=0)
        rng = np.random.default_rng([seed, k])
        fractions = []
        for block in bootstrap_samples(x, reps, rng):
            for start in range(0, len(block), 256):  # [256, N, K] at a time
                rows = block[start : start + 256, :, None]
                fractions.append((rows > taus).mean(axis=1))
        fractions = np.concatenate(fractions)
        tail = 100 * (1 - CONFIDENCE) / 2
        bands[name] = np.percentile(fractions, [tail, 100 - tail], axis=0)
    return profiles, bands


def plot_performance_profiles(
    scores: Mapping[str, np.ndarray],
    path: str | Path,
    xlabel: str = "score τ",
    title: str = "",
) -> Path:
    """A performance-profile figure of ``scores`` (finite runs only) at
    ``path``: fraction of runs scoring above τ, with 95% bands."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scores = {k: np.asarray(v, np.float64).reshape(-1) for k, v in scores.items()}
    scores = {k: v[np.isfinite(v)] for k, v in scores.items()}
    scores = {k: v for k, v in scores.items() if len(v)}
    values = np.concatenate(list(scores.values())) if scores else np.zeros(1)
    low, high = float(values.min()), float(values.max())
    taus = np.linspace(low, high if high > low else low + 1.0, 101)
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    if scores:
        profiles, bands = performance_profiles(scores, taus)
        for name, profile in profiles.items():
            (line,) = ax.plot(taus, profile, lw=1.8, label=name)
            ax.fill_between(taus, *bands[name], alpha=0.2, color=line.get_color(), lw=0)
        ax.legend(fontsize=7, loc="best")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of runs with score > τ")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    write_whole(path, fig.savefig)
    plt.close(fig)
    return Path(path)
