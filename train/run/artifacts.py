"""Files a training run leaves behind: ``config.json``, ``metrics.jsonl``,
``curve.png`` (the runner adds ``checkpoint/``, ``.lock`` marks a writer).

Every JSON file is strict JSON: non-finite numbers are written as null.
Every file is read back through a validating reader (``read_json``,
``read_metrics``; ``config.json`` by ``RunSpec.load``): a damaged file is a
one-line ``RunDirError`` naming it, never a traceback.

Metrics are host arrays ``name -> [R]``, one row per ``log_every`` updates
(``ondevice_rl.metrics.log_rows``), each keyed by the (1-based) last update it
covers; update ``i`` ends at ``i * steps_per_update`` env steps.
``metrics.jsonl`` rows are keyed by their ``update`` field, not their line.
"""

import json
import math
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ondevice_rl.train.run.checks import Worded, literal
from ondevice_rl.train.services.writes import write_whole

CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.jsonl"
CURVE_FILE = "curve.png"
CHECKPOINT_DIR = "checkpoint"
LOCK_FILE = ".lock"


def env_steps_axis(num_updates: int, steps_per_update: int) -> np.ndarray:
    """``[U]`` int64: env steps taken after each update."""
    return (np.arange(num_updates, dtype=np.int64) + 1) * steps_per_update


def finite_or_none(x: float) -> float | None:
    # JSON has no NaN/Infinity: non-finite values are written as null.
    return float(x) if math.isfinite(x) else None


class RunDirError(ValueError):
    """An output directory that cannot be used (one-line message)."""


class RunDirArgError(Worded, RunDirError):
    """A ``RunDirError`` naming the argument that gave the directory
    (``{out_dir}``, ``{resume}``, ``{force}`` in its template)."""


def _strict(value: Any) -> Any:
    if isinstance(value, float | np.floating):
        return finite_or_none(float(value))
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strict(v) for v in value]
    return value


def write_json(path: Path, data: dict) -> Path:
    """Writes strict JSON (non-finite floats as null), atomically: a kill
    leaves the old file or the new one, never half of one."""
    text = json.dumps(_strict(data), indent=2, default=str, allow_nan=False)
    write_whole(path, lambda tmp: tmp.write_text(text + "\n"))
    return path


def read_json(path: Path) -> dict:
    """A JSON object from ``path``; ``RunDirError`` (one line) if the file
    is missing, unreadable, not JSON or not an object."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as e:
        raise RunDirError(f"{path}: cannot read it ({e.strerror})") from None
    except UnicodeDecodeError:
        raise RunDirError(f"{path}: not a text file") from None
    except json.JSONDecodeError as e:
        raise RunDirError(
            f"{path}: not valid JSON ({e.msg} at line {e.lineno})"
        ) from None
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: not a JSON object")
    return data


def metric_rows(
    metrics: dict[str, np.ndarray],
    steps_per_update: int,
    first_update: int = 0,
    updates: np.ndarray | None = None,
) -> list[str]:
    """One JSON line per row: ``update`` (the row's last, 1-based: ``updates``,
    or ``first_update + 1, + 2, ...``), ``env_steps``, then every metric
    (``episode_return`` first), null where non-finite."""
    names = sorted(metrics, key=lambda k: (k != "episode_return", k))
    columns = [(k, np.asarray(metrics[k], np.float64).tolist()) for k in names]
    if updates is None:
        updates = first_update + 1 + np.arange(len(metrics["episode_return"]))
    lines = []
    for i, update in enumerate(np.asarray(updates).tolist()):
        row = {"update": update, "env_steps": update * steps_per_update}
        row.update({k: finite_or_none(values[i]) for k, values in columns})
        lines.append(json.dumps(row, allow_nan=False) + "\n")
    return lines


def append_metrics(
    path: Path,
    metrics: dict[str, np.ndarray],
    steps_per_update: int,
    done: int,
    updates: np.ndarray | None = None,
    sync: bool = True,
) -> None:
    """Appends the rows after update ``done`` (``metric_rows``) in one write,
    flushed: the file only ever ends with whole lines (a kill mid-write at
    most loses this segment's rows, which a resume recomputes). ``sync``
    makes them durable (the runner does before each checkpoint)."""
    text = "".join(metric_rows(metrics, steps_per_update, done, updates))
    with path.open("a") as f:
        f.write(text)
        f.flush()
        if sync:
            os.fsync(f.fileno())


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _row_problem(row: object) -> str | None:
    """Why a parsed line is not a metrics row, or None."""
    if not isinstance(row, dict):
        return "not a JSON object"
    update = row.get("update")
    if not _is_int(update) or update < 1:
        return f"update must be a positive integer, got {update!r}"
    for name, value in row.items():
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int | float)
        ):
            return f"{name} must be a number or null, got {value!r}"
    return None


def read_metrics(
    path: str | Path, on_bad_line: Callable[[str], None] | None = None
) -> list[dict]:
    """The rows of a ``metrics.jsonl`` file by ascending ``update`` (a later
    row for the same update replaces an earlier one). A torn last line (no
    newline: a kill mid-write) is ignored. Any other bad line is a
    ``RunDirError`` naming the file and line, or, with ``on_bad_line``, that
    message passed to it and the line skipped."""
    rows: dict[int, dict] = {}
    with Path(path).open(errors="replace") as f:
        for number, line in enumerate(f, 1):
            if not line.endswith("\n"):
                break
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                problem = _row_problem(row)
            except json.JSONDecodeError as e:
                problem = f"not JSON ({e.msg})"
            if problem is not None:
                message = f"{path}, line {number}: {problem}"
                if on_bad_line is None:
                    raise RunDirError(message)
                on_bad_line(message)
                continue
            rows[row["update"]] = row
    return [rows[u] for u in sorted(rows)]


def truncate_metrics(path: Path, updates: int) -> list[dict]:
    """Keeps the rows of updates ``1..updates`` of ``metrics.jsonl``
    (resuming from that checkpoint: later rows are replaced); returns them.
    ``RunDirError`` if a bad line stands in the way, or the rows do not end
    at ``updates``."""
    rows = read_metrics(path) if path.exists() else []
    rows = [r for r in rows if r["update"] <= updates]
    last = rows[-1]["update"] if rows else 0
    if last != updates:
        raise RunDirError(
            f"{path} ends at update {last}, not at the update {updates} of the "
            "checkpoint it resumes from"
        )
    text = "".join(json.dumps(r, allow_nan=False) + "\n" for r in rows)
    write_whole(path, lambda tmp: tmp.write_text(text))
    return rows


def rows_to_metrics(rows: list[dict]) -> dict[str, np.ndarray]:
    """``metrics.jsonl`` rows back to ``name -> [U]`` float32 (null -> NaN)."""
    names = [k for k in (rows[0] if rows else {}) if k not in ("update", "env_steps")]
    return {
        k: np.asarray([np.nan if r.get(k) is None else r[k] for r in rows], np.float32)
        for k in names
    }


def check_run_dir(out: Path, resume: bool = False, force: bool = False) -> bool:
    """What ``prepare_run_dir`` would refuse in ``out``, found without
    writing anything (before a lock is taken, say); whether an earlier run
    is there."""
    name = "{resume}" if resume else "{out_dir}"
    try:
        if out.exists() and not out.is_dir():
            raise RunDirArgError(f"{name} {literal(out)} is a file, not a directory")
        earlier = out.is_dir() and any(p.name != LOCK_FILE for p in out.iterdir())
        config = (out / CONFIG_FILE).is_file()
    except OSError as e:  # a name too long, a directory we may not read
        raise RunDirArgError(
            f"{name} {literal(out)}: cannot use it ({literal(e.strerror)})"
        ) from None
    if resume and not config:
        raise RunDirArgError(
            f"{name} {literal(out)}: no {CONFIG_FILE} there, not a run"
        )
    if not resume and earlier and not force:
        raise RunDirArgError(
            f"{name} {literal(out)} holds an earlier run; {{resume}} "
            "continues it, {force} replaces it"
        )
    return earlier


def prepare_run_dir(out: Path, resume: bool = False, force: bool = False) -> None:
    """Checks ``out`` before anything compiles: a directory we can write to;
    an earlier run there only with ``resume`` (continue it) or ``force``
    (replace it), which empties it. Raises ``RunDirError`` (``RunDirArgError``
    naming the argument: ``{out_dir}``, ``{resume}``, ``{force}``)."""
    name = "{resume}" if resume else "{out_dir}"
    if check_run_dir(out, resume, force) and not resume:
        for path in out.iterdir():  # the lock (if this process holds it) stays
            if path.name == LOCK_FILE:
                continue
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise RunDirArgError(
            f"{name} {literal(out)}: cannot write there ({literal(e.strerror)})"
        ) from None


def plot_curve(
    path: Path, metrics: dict[str, np.ndarray], steps: np.ndarray, title: str
) -> Path:
    """Episode return (per row, and a moving average) against ``steps``
    (``[R]`` env steps of the rows); ``eval_return`` too, where finite
    (periodic deterministic evaluation)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    returns = np.asarray(metrics.get("episode_return", []), np.float64)
    finite = np.isfinite(returns)  # rows where no episode finished: NaN
    evals = np.asarray(metrics.get("eval_return", []), np.float64)
    all_steps = np.asarray(steps)
    steps, returns = all_steps[finite], returns[finite]
    fig = Figure(figsize=(6.4, 4.0), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    if len(returns):
        window = max(1, len(returns) // 50)
        ax.plot(
            steps,
            returns,
            color="tab:blue",
            alpha=0.35 if window > 1 else 1.0,
            lw=1,
            label="per update",
        )
        if window > 1:
            smooth = np.convolve(returns, np.ones(window) / window, mode="valid")
            ax.plot(
                steps[window - 1 :],
                smooth,
                color="tab:blue",
                lw=2,
                label=f"mean of {window}",
            )
        at = np.flatnonzero(np.isfinite(evals))
        if len(at):
            ax.plot(
                all_steps[at],
                evals[at],
                "o-",
                color="tab:orange",
                ms=3,
                lw=1.5,
                label="eval (deterministic)",
            )
        ax.legend(loc="lower right")
    else:
        ax.text(
            0.5,
            0.5,
            "no updates completed",
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
    ax.set_xlabel("env steps")
    ax.set_ylabel("episode return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return write_whole(path, fig.savefig)
