"""What a training run writes into its directory as it goes (or nothing,
for a run without one): ``config.json`` with its status, ``metrics.jsonl``
and TensorBoard scalars appended per segment, ``curve.png`` at the end.
Checkpoints are the runner's (``train/run/runner.py``)."""

from pathlib import Path
from typing import Any

import numpy as np

from ondevice_rl.train.kit.registry import algorithm_of
from ondevice_rl.train.run import artifacts
from ondevice_rl.train.services.tensorboard import TensorBoardLog


class RunFiles:
    """The files of one run in ``out`` (every method a no-op if ``out`` is
    None). ``done`` is the update the run starts (or resumes) from: a fresh
    run starts an empty ``metrics.jsonl``, a resumed one keeps its first
    ``done`` rows (``earlier``, ``name -> [done]``) and drops any later ones
    (RunDirError if it holds fewer)."""

    def __init__(self, out: Path | None, spec: Any, done: int):
        self.out = out
        self.per_update = spec.config.steps_per_update
        self.title = (
            f"{spec.config.env} {algorithm_of(spec.config).name.upper()}, "
            f"seed {spec.seed}"
        )
        self.info = spec.to_json()
        self.earlier: dict[str, np.ndarray] = {}
        self.board = None
        if out is None:
            return
        path = out / artifacts.METRICS_FILE
        if done:
            rows = artifacts.truncate_metrics(path, done)
            self.earlier = artifacts.rows_to_metrics(rows)
        else:
            path.write_text("")
        self.board = TensorBoardLog(out, self.per_update, done)

    def start(self, segments: list[int], done: int) -> None:
        """``config.json`` says the run is running, from update ``done``, in
        segments of these lengths."""
        self.info["segments"] = segments
        self.status(status="running", updates=done)

    def status(self, **fields: Any) -> None:
        """Rewrites ``config.json``: the run's spec plus ``fields``."""
        if self.out is not None:
            artifacts.write_json(
                self.out / artifacts.CONFIG_FILE, dict(self.info, **fields)
            )

    def append(self, metrics: dict[str, np.ndarray], done: int) -> None:
        """A segment's ``[n]`` metrics, updates ``done + 1 ... done + n``."""
        if self.out is not None:
            path = self.out / artifacts.METRICS_FILE
            artifacts.append_metrics(path, metrics, self.per_update, done)
            self.board.append(metrics, done)

    def finish(self, metrics: dict[str, np.ndarray], **status: Any) -> None:
        """The curve, the final ``config.json``; closes the event files."""
        if self.out is None:
            return
        self.board.close()
        path = self.out / artifacts.CURVE_FILE
        artifacts.plot_curve(path, metrics, self.per_update, self.title)
        self.status(**status)
