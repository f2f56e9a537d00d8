"""Learning curves of several runs and sweeps on one figure
(``ondevice-rl plot``).

A run directory (``metrics.jsonl``) gives one curve; a sweep directory
(``sweep.csv`` + ``curves.npz``, ``train/sweep/report.py``) gives one curve
per setting, the mean ± std over its seeds, best ``top`` settings first
(``ranking.csv`` order). Curves are ``metric`` (default ``episode_return``)
against env steps; non-finite points (``eval_return`` between evaluations)
are left out. Drawn with matplotlib's Agg ``Figure`` API, as
``artifacts.plot_curve``.
"""

import csv
import json
import sys
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ondevice_rl.train.run import artifacts

#: sweep.csv columns that are not a setting's values.
_NOT_VALUES = {"member", "setting", "seed", "num_updates", "final_return"}
_NOT_VALUES |= {"last10_return", "auc"}
Warn = Callable[[str], None]


class Curve(NamedTuple):
    label: str
    steps: np.ndarray  # [U] env steps
    mean: np.ndarray  # [U]
    std: np.ndarray | None  # [U] over seeds (sweeps), or None (one run)


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_curve(
    run_dir: Path, metric: str = "episode_return", warn: Warn = _to_stderr
) -> Curve:
    """One run's curve, labelled ``dir (env algo, seed s)``; a bad line of
    ``metrics.jsonl`` is skipped, named in one line to ``warn``."""
    skip = lambda message: warn(f"{message}; skipped")  # noqa: E731
    rows = artifacts.read_metrics(run_dir / artifacts.METRICS_FILE, skip)
    if rows and metric not in rows[0]:
        known = ", ".join(k for k in rows[0] if k not in ("update", "env_steps"))
        raise ValueError(f"{run_dir}: no metric {metric!r} (known: {known})")
    steps = np.asarray([r["env_steps"] for r in rows], np.int64)
    values = [np.nan if r.get(metric) is None else r[metric] for r in rows]
    label = run_dir.name or str(run_dir)
    try:
        info = json.loads((run_dir / artifacts.CONFIG_FILE).read_text())
        env, algo, seed = info["config"]["env"], info["algo"], info["seed"]
        label = f"{label} ({env} {algo}, seed {seed})"
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return Curve(label, steps, np.asarray(values, np.float64), None)


def sweep_curves(
    sweep_dir: Path, metric: str = "episode_return", top: int = 10
) -> list[Curve]:
    """Mean ± std over seeds of the best ``top`` settings of a sweep
    (``ValueError`` naming a damaged ``sweep.csv`` or ``curves.npz``)."""
    try:
        with (sweep_dir / "sweep.csv").open(newline="") as f:
            rows = list(csv.DictReader(f))
    except (OSError, csv.Error, UnicodeDecodeError) as e:
        raise ValueError(f"{sweep_dir / 'sweep.csv'}: unreadable ({e})") from None
    if any(not str(r.get("member")).isdigit() or not r.get("setting") for r in rows):
        raise ValueError(
            f"{sweep_dir / 'sweep.csv'}: damaged (a row without its member)"
        )
    arrays = _read_npz(sweep_dir / "curves.npz")
    by_setting: dict[str, list[dict]] = {}
    for row in rows:
        by_setting.setdefault(row["setting"], []).append(row)
    columns = [c for c in (rows[0] if rows else {}) if c not in _NOT_VALUES]
    varying = [c for c in columns if len({r[c] for r in rows}) > 1]
    order = list(by_setting)
    ranking = sweep_dir / "ranking.csv"
    if ranking.is_file():
        with ranking.open(newline="") as f:
            ranked = [r["setting"] for r in csv.DictReader(f)]
        order = [s for s in ranked if s in by_setting]
    curves = []
    for setting in order[:top]:
        members = by_setting[setting]
        key = f"member_{members[0]['member']}_{metric}"
        if key not in arrays:
            raise ValueError(f"{sweep_dir}: no metric {metric!r} in curves.npz")
        values = np.stack(
            [arrays[f"member_{m['member']}_{metric}"] for m in members]
        ).astype(np.float64)
        steps = arrays[f"member_{members[0]['member']}_env_steps"]
        values_text = " ".join(f"{c}={members[0][c]}" for c in varying)
        label = (
            f"{sweep_dir.name}: {values_text or 'base config'} ({len(members)} seeds)"
        )
        curves.append(Curve(label, steps, values.mean(0), values.std(0)))
    return curves


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` file, read whole (its CRCs checked):
    ``ValueError`` naming the file if damaged."""
    try:
        with np.load(path) as data:
            return {key: data[key] for key in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as e:
        raise ValueError(f"{path}: damaged ({e})") from None


def load_curves(
    paths: list[Path],
    metric: str = "episode_return",
    top: int = 10,
    warn: Warn = _to_stderr,
) -> list[Curve]:
    """The curves of run and sweep directories (ValueError, one line, for a
    path that is neither, or a damaged sweep file; a bad line of a run's
    ``metrics.jsonl`` is skipped and named to ``warn``)."""
    curves = []
    for path in map(Path, paths):
        if (path / "sweep.csv").is_file() and (path / "curves.npz").is_file():
            curves += sweep_curves(path, metric, top)
        elif (path / artifacts.METRICS_FILE).is_file():
            curves.append(run_curve(path, metric, warn))
        elif not path.exists():
            raise ValueError(f"{path}: no such directory")
        else:
            raise ValueError(
                f"{path}: neither a run ({artifacts.METRICS_FILE}) nor a sweep "
                "(sweep.csv, curves.npz)"
            )
    return curves


def plot_curves(
    curves: list[Curve], path: Path, metric: str = "episode_return", title: str = ""
) -> Path:
    """Draws ``curves`` (std as a band) into the image file ``path``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for curve in curves:
        ok = np.isfinite(curve.mean)
        steps, mean = curve.steps[ok], curve.mean[ok]
        marker = "o-" if ok.sum() < len(ok) else "-"
        (line,) = ax.plot(steps, mean, marker, ms=3, lw=1.5, label=curve.label)
        if curve.std is not None:
            std = curve.std[ok]
            ax.fill_between(
                steps, mean - std, mean + std, alpha=0.2, color=line.get_color()
            )
    ax.set_xlabel("env steps")
    ylabel = metric.replace("_", " ")
    if any(c.std is not None for c in curves):
        ylabel += " (sweeps: mean ± std over seeds)"
    ax.set_ylabel(ylabel)
    ax.set_title(title or f"{len(curves)} curve(s)")
    ax.grid(alpha=0.3)
    if curves:
        ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path)
    return Path(path)
