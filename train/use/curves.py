"""Learning curves as ``ondevice-rl plot`` reads them.

A curve is one setting trained on one or more seeds (``Series``): a run
directory (``metrics.jsonl``) is one seed, and run directories whose
``config.json`` differ only in the seed are one curve of several seeds; a
sweep directory (``sweep.csv`` + ``curves.npz``) gives one curve per setting,
best ``top`` first (``ranking.csv`` order). Values are a metric (default
``episode_return``) against env steps; rows are matched by ``env_steps``, so
runs that log every N-th update plot as they are. Non-finite values
(``eval_return`` between evaluations) are NaN; ``train/use/smoothing.py``
leaves them out.
"""

import csv
import json
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ondevice_rl.train.run import artifacts
from ondevice_rl.train.services.progress import to_stderr
from ondevice_rl.train.sweep.result import RESULT_COLUMNS

#: config.json fields that make runs the same setting (the seed aside).
_SETTING_FIELDS = ("algo", "config", "hyperparams", "env_params")
Warn = Callable[[str], None]


class Series(NamedTuple):
    """One setting's raw curve over its seeds."""

    label: str
    steps: np.ndarray  # [U] int64 env steps, ascending
    values: np.ndarray  # [S, U] float64, NaN where a seed has no value


def _aligned(steps: list[np.ndarray], values: list[np.ndarray]) -> tuple:
    """Seeds' ``[U_i]`` curves on the union of their steps: ``([U], [S, U])``."""
    union = np.unique(np.concatenate(steps)) if steps else np.zeros(0, np.int64)
    table = np.full((len(values), len(union)), np.nan)
    for seed, (at, row) in enumerate(zip(steps, values, strict=True)):
        table[seed, np.searchsorted(union, at)] = row
    return union.astype(np.int64), table


def _run_info(run_dir: Path) -> dict:
    try:
        info = json.loads((run_dir / artifacts.CONFIG_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def _setting_key(run_dir: Path, info: dict) -> str:
    """Runs with equal keys differ at most in the seed."""
    if not all(k in info for k in ("algo", "config")):
        return f"dir:{run_dir.resolve()}"
    return json.dumps({k: info.get(k) for k in _SETTING_FIELDS}, sort_keys=True)


def _run_label(run_dirs: list[Path], infos: list[dict]) -> str:
    names = [d.name or str(d) for d in run_dirs]
    label = (
        ", ".join(names) if len(names) <= 3 else f"{names[0]} and {len(names) - 1} more"
    )
    try:
        env, algo = infos[0]["config"]["env"], infos[0]["algo"]
        seeds = ", ".join(str(i["seed"]) for i in infos)
        return f"{label} ({env} {algo}, seed{'s' * (len(infos) > 1)} {seeds})"
    except (KeyError, TypeError):
        return label


def run_series(
    run_dirs: list[Path],
    metric: str = "episode_return",
    warn: Warn = to_stderr,
    group: bool = True,
) -> tuple[list[tuple[Path, Series]], dict[Path, list[str]]]:
    """Curves of run directories, one per setting (one per directory when not
    ``group``), each with its first directory in ``run_dirs``' order, and the
    runs lacking ``metric`` (path -> the metrics it has).
    A bad line of a ``metrics.jsonl`` is skipped, named in one line to
    ``warn``."""
    skip = lambda message: warn(f"{message}; skipped")  # noqa: E731
    groups: dict[str, list[tuple[Path, dict, np.ndarray, np.ndarray]]] = {}
    lacking = {}
    for run_dir in run_dirs:
        rows = artifacts.read_metrics(run_dir / artifacts.METRICS_FILE, skip)
        values = np.asarray(
            [np.nan if r.get(metric) is None else r[metric] for r in rows], np.float64
        )
        if not np.isfinite(values).any():
            names = {k for r in rows for k in r} - {"update", "env_steps"}
            lacking[run_dir] = sorted(names)
            continue
        steps = np.asarray([r["env_steps"] for r in rows], np.int64)
        info = _run_info(run_dir)
        key = _setting_key(run_dir, info) if group else str(run_dir)
        groups.setdefault(key, []).append((run_dir, info, steps, values))
    series = []
    for members in groups.values():
        first = members[0][0]
        members.sort(key=lambda m: (str(m[1].get("seed", "")), str(m[0])))
        dirs, infos, steps, values = zip(*members, strict=True)
        label = _run_label(list(dirs), list(infos))
        series.append((first, Series(label, *_aligned(steps, values))))
    return series, lacking


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` file, read whole (its CRCs checked):
    ``ValueError`` naming the file if damaged."""
    try:
        with np.load(path) as data:
            return {key: data[key] for key in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as e:
        raise ValueError(f"{path}: damaged ({e})") from None


def sweep_series(
    sweep_dir: Path, metric: str = "episode_return", top: int = 10
) -> list[Series]:
    """The best ``top`` settings of a sweep, each over its seeds whose
    curves ``curves.npz`` holds; none when it lacks ``metric``
    (``ValueError`` naming a damaged ``sweep.csv`` or ``curves.npz``)."""
    path = sweep_dir / "sweep.csv"
    try:
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
    except (OSError, csv.Error, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: unreadable ({e})") from None
    if any(not str(r.get("member")).isdigit() or not r.get("setting") for r in rows):
        raise ValueError(f"{path}: damaged (a row without its member)")
    arrays = _read_npz(sweep_dir / "curves.npz")
    by_setting: dict[str, list[dict]] = {}
    for row in rows:
        by_setting.setdefault(row["setting"], []).append(row)
    order = list(by_setting)
    ranking = sweep_dir / "ranking.csv"
    if ranking.is_file():
        with ranking.open(newline="") as f:
            ranked = [r["setting"] for r in csv.DictReader(f)]
        order = [s for s in ranked if s in by_setting]
    varying = _varying_columns(rows)
    series = []
    for setting in order[:top]:
        members = [
            m["member"]
            for m in by_setting[setting]
            if f"member_{m['member']}_{metric}" in arrays
        ]
        if not members:  # the metric is not kept, or none has finished
            continue
        steps = [arrays[f"member_{m}_env_steps"].astype(np.int64) for m in members]
        values = [arrays[f"member_{m}_{metric}"].astype(np.float64) for m in members]
        first = by_setting[setting][0]
        values_text = " ".join(f"{c}={first[c]}" for c in varying)
        label = (
            f"{sweep_dir.name}: {values_text or 'base config'} ({len(members)} seeds)"
        )
        series.append(Series(label, *_aligned(steps, values)))
    return series


def _varying_columns(rows: list[dict]) -> list[str]:
    """``sweep.csv`` columns holding a setting's values that vary over rows:
    not the member, seed, setting or score columns."""
    scores = {"member", "setting", "seed", "num_updates", "auc", *RESULT_COLUMNS}
    columns = [
        c
        for c in (rows[0] if rows else {})
        if c not in scores and not c.endswith("_return")
    ]
    return [c for c in columns if len({r[c] for r in rows}) > 1]


def load_series(
    paths: list[Path],
    metric: str = "episode_return",
    top: int = 10,
    warn: Warn = to_stderr,
    group: bool = True,
) -> list[Series]:
    """The curves of run and sweep directories (module docstring). Those
    lacking ``metric`` are named in one ``warn`` line and skipped.

    Raises:
        ValueError: one line, for a path that is neither a run nor a sweep, a
            damaged sweep file, or when no path has ``metric``.
    """
    paths = list(dict.fromkeys(map(Path, paths)))
    runs, found, lacking = [], {}, {}
    for path in paths:
        if (path / "sweep.csv").is_file() and (path / "curves.npz").is_file():
            found[path] = sweep_series(path, metric, top)
            if not found[path]:
                lacking[path] = []
        elif (path / artifacts.METRICS_FILE).is_file():
            runs.append(path)
        elif not path.exists():
            raise ValueError(f"{path}: no such directory")
        else:
            raise ValueError(
                f"{path}: neither a run ({artifacts.METRICS_FILE}) nor a sweep "
                "(sweep.csv, curves.npz)"
            )
    run_curves, lacking_runs = run_series(runs, metric, warn, group)
    for first, series in run_curves:
        found.setdefault(first, []).append(series)
    lacking.update(lacking_runs)
    lacking = {path: lacking[path] for path in paths if path in lacking}
    known = sorted({name for names in lacking.values() for name in names})
    if metric in known:  # there, but never a number (an eval never run)
        what, known_text = f"no finite value of {metric!r}", ""
    else:
        what = f"no metric {metric!r}"
        known_text = f" (known: {', '.join(known)})" if known else ""
    if lacking and not any(found.values()):
        raise ValueError(f"{what} in any of them{known_text}")
    if lacking:
        skipped = ", ".join(map(str, lacking))
        warn(f"{what} in {skipped}; skipped{known_text}")
    return [s for path in paths for s in found.get(path, [])]
