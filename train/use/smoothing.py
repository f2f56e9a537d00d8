"""What ``ondevice-rl plot`` draws of a curve (``train/use/curves.py``'s
``Series``, one setting over its seeds): each seed smoothed over its finite
points, by an exponential moving average or a trailing window mean; the
line their mean; the band their spread over seeds (min–max, interquartile or
± std), or for a curve of one seed ±1 std of its own values around the
smoothed line.
"""

from typing import NamedTuple

import numpy as np

from ondevice_rl.train.use.curves import Series

SMOOTHINGS = ("ema", "window", "none")
BANDS = ("minmax", "iqr", "std")
#: Without ``span``, each curve is smoothed over this share of its points.
AUTO_SPAN_SHARE = 0.02


class Curve(NamedTuple):
    """What is drawn of a ``Series``: a line and a band (None: no band)."""

    label: str
    steps: np.ndarray  # [U]
    line: np.ndarray  # [U] mean over seeds of the smoothed values
    low: np.ndarray | None  # [U]
    high: np.ndarray | None  # [U]
    seeds: int
    sparse: bool  # few points (periodic evaluations): drawn with markers


def ema(x: np.ndarray, span: int) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, std)`` ``[N]`` of ``x`` ``[N]``, exponentially weighted with
    ``alpha = 2 / (span + 1)`` and started at ``x[0]``: ``m_t = m_{t-1} +
    alpha (x_t - m_{t-1})``, ``v_t = (1 - alpha) (v_{t-1} + alpha (x_t -
    m_{t-1})^2)``."""
    # lazy: `ondevice-rl --help` reads SMOOTHINGS; scipy.signal adds 0.2-2 s
    from scipy.signal import lfilter

    alpha = 2.0 / (span + 1.0)
    mean = lfilter([alpha], [1.0, alpha - 1.0], x, zi=[(1.0 - alpha) * x[0]])[0]
    previous = np.concatenate([x[:1], mean[:-1]])
    var = lfilter([(1.0 - alpha) * alpha], [1.0, alpha - 1.0], (x - previous) ** 2)
    return mean, np.sqrt(var)


def trailing_window(x: np.ndarray, span: int) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, std)`` ``[N]`` of the last ``span`` values of ``x`` ``[N]``
    at each point (fewer at the start)."""
    count = np.minimum(np.arange(1, len(x) + 1), span)

    def trailing_sum(y):
        total = np.cumsum(y)
        total[span:] -= total[:-span]
        return total

    mean = trailing_sum(x) / count
    var = np.maximum(trailing_sum(x * x) / count - mean * mean, 0.0)
    return mean, np.sqrt(var)


def auto_span(values: np.ndarray) -> int:
    """The default span of ``values`` ``[S, U]``: 2 % of a seed's points."""
    points = int(np.isfinite(values).sum(axis=1).max(initial=0))
    return max(1, round(points * AUTO_SPAN_SHARE))


def summarize(
    series: Series, smooth: str = "ema", span: int | None = None, band: str = "minmax"
) -> Curve:
    """``series`` smoothed per seed and reduced over seeds (module docstring);
    ``span`` None: ``auto_span``."""
    values = series.values
    span = auto_span(values) if span is None else span
    smoothed = np.full_like(values, np.nan)
    spread = np.full_like(values, np.nan)
    for seed, row in enumerate(values):
        ok = np.isfinite(row)
        if not ok.any():
            continue
        if smooth == "ema":
            smoothed[seed, ok], spread[seed, ok] = ema(row[ok], span)
        elif smooth == "window":
            smoothed[seed, ok], spread[seed, ok] = trailing_window(row[ok], span)
        else:
            smoothed[seed, ok] = row[ok]
    keep = np.isfinite(smoothed).any(axis=0)
    steps, smoothed, spread = series.steps[keep], smoothed[:, keep], spread[:, keep]
    seeds = len(values)
    sparse = not np.isfinite(values).all() and keep.sum() < 100
    line = np.nanmean(smoothed, axis=0)
    low = high = None
    if seeds == 1 and smooth != "none":
        low, high = line - spread[0], line + spread[0]
    elif seeds > 1 and band == "minmax":
        low, high = np.nanmin(smoothed, axis=0), np.nanmax(smoothed, axis=0)
    elif seeds > 1 and band == "iqr":
        low, high = np.nanpercentile(smoothed, [25, 75], axis=0)
    elif seeds > 1:
        std = np.nanstd(smoothed, axis=0)
        low, high = line - std, line + std
    return Curve(series.label, steps, line, low, high, seeds, sparse)
