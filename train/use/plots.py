"""Learning curves of several runs and sweeps on one figure
(``ondevice-rl plot``).

Each curve (``train/use/curves.py``, reduced by ``smoothing.py``) is drawn
as a line, its seeds' smoothed mean, and a band of the same colour: the
spread over seeds, or for a curve of one seed ±1 std of its values around
the line. Drawn with matplotlib's Agg ``Figure`` API (no pyplot state), as
``artifacts.plot_curve``.
"""

from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ondevice_rl.train.services.writes import write_whole
from ondevice_rl.train.use.curves import Series
from ondevice_rl.train.use.smoothing import Curve, summarize

_BAND_WORDS = {
    "minmax": "min–max over seeds",
    "iqr": "25–75th percentile over seeds",
    "std": "± std over seeds",
}


def describe(curves: list[Curve], smooth: str, span: int | None, band: str) -> str:
    """How the figure reduced ``curves``, in words (its caption)."""
    how = {"ema": "EMA", "window": "trailing mean"}.get(smooth)
    text = f"{how}, span {span or '2% of the points'}" if how else "not smoothed"
    bands = []
    if any(c.seeds > 1 for c in curves):
        bands.append(_BAND_WORDS[band])
    if smooth != "none" and any(c.seeds == 1 for c in curves):
        bands.append("± std of a single seed's values")
    return f"{text}; band: {', '.join(bands)}" if bands else text


def figure(
    curves: list[Curve],
    metric: str = "episode_return",
    title: str = "",
    caption: str = "",
):
    """A matplotlib ``Figure``: per curve one line (``Line2D``, the smoothed
    mean) and, where it has one, one band (``fill_between``'s
    ``PolyCollection``) in the line's colour."""
    fig = Figure(figsize=(8, 5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for curve in curves:
        style = "o-" if curve.sparse else "-"
        (line,) = ax.plot(
            curve.steps, curve.line, style, ms=3, lw=1.5, label=curve.label
        )
        if curve.low is not None:
            ax.fill_between(
                curve.steps,
                curve.low,
                curve.high,
                alpha=0.2,
                color=line.get_color(),
                lw=0,
            )
    ax.set_xlabel("env steps")
    ax.set_ylabel(metric.replace("_", " "))
    ax.set_title(title or f"{len(curves)} curve(s)")
    ax.grid(alpha=0.3)
    if curves:
        ax.legend(fontsize=7, loc="best")
    if caption:
        fig.text(0.01, 0.01, caption, fontsize=7, color="0.35")
    fig.tight_layout(rect=(0, 0.03 if caption else 0, 1, 1))
    return fig


def plot_series(
    series: list[Series],
    path: str | Path,
    metric: str = "episode_return",
    title: str = "",
    smooth: str = "ema",
    span: int | None = None,
    band: str = "minmax",
):
    """Smooths ``series`` (``summarize``), draws them (``figure``) into the
    image file ``path`` and returns the figure."""
    curves = [summarize(s, smooth, span, band) for s in series]
    fig = figure(curves, metric, title, describe(curves, smooth, span, band))
    write_whole(path, fig.savefig)
    return fig
