"""Files a training run leaves behind: ``config.json``, ``metrics.jsonl``,
``curve.png``.

Metrics are host arrays ``name -> [U]`` (one value per update, ``U`` updates
completed); update ``i`` (1-based) ends at ``i * steps_per_update`` env steps.
"""

import json
import math
from pathlib import Path
from typing import Any

import jax
import numpy as np

from ondevice_rl.train.registry import algorithm_of

CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.jsonl"
CURVE_FILE = "curve.png"
CHECKPOINT_DIR = "checkpoint"


def env_steps_axis(num_updates: int, steps_per_update: int) -> np.ndarray:
    """``[U]`` int64: env steps taken after each update."""
    return (np.arange(num_updates, dtype=np.int64) + 1) * steps_per_update


def finite_or_none(x: float) -> float | None:
    # JSON has no NaN/Infinity: non-finite values are written as null.
    return float(x) if math.isfinite(x) else None


def run_info(config: Any, hyperparams: Any, seed: int, **extra: Any) -> dict:
    """What ``config.json`` holds: config, hyperparams, seed, JAX version and
    backend, plus ``extra`` (segments, results...)."""
    return {
        "algo": algorithm_of(config).name,
        "config": config.to_dict(),
        "hyperparams": {k: float(v) for k, v in hyperparams._asdict().items()},
        "seed": seed,
        "jax": {
            "version": jax.__version__,
            "backend": jax.default_backend(),
            "devices": [str(d) for d in jax.devices()],
        },
        **extra,
    }


def write_json(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    return path


def write_metrics(path: Path, metrics: dict[str, np.ndarray], steps_per_update: int) -> Path:
    """One JSON object per update: ``update``, ``env_steps``, then every metric
    (``episode_return`` first) as a float (null where non-finite)."""
    names = sorted(metrics, key=lambda k: (k != "episode_return", k))
    count = len(metrics["episode_return"])
    steps = env_steps_axis(count, steps_per_update)
    with path.open("w") as f:
        for i in range(count):
            row = {"update": i + 1, "env_steps": int(steps[i])}
            row.update({k: finite_or_none(float(metrics[k][i])) for k in names})
            f.write(json.dumps(row) + "\n")
    return path


def read_metrics(path: str | Path) -> list[dict]:
    """The rows of a ``metrics.jsonl`` file."""
    with Path(path).open() as f:
        return [json.loads(line) for line in f if line.strip()]


def plot_curve(
    path: Path, metrics: dict[str, np.ndarray], steps_per_update: int, title: str
) -> Path:
    """Episode return (per update, and a moving average) against env steps."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    returns = np.asarray(metrics.get("episode_return", []), np.float64)
    steps = env_steps_axis(len(returns), steps_per_update)
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
    fig.savefig(path)
    return path
