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
    None). ``done`` is the update the run starts (or resumes) from."""

    def __init__(self, out: Path | None, spec: Any, segments: list[int], done: int):
        self.out = out
        self.per_update = spec.config.steps_per_update
        self.title = (
            f"{spec.config.env} {algorithm_of(spec.config).name.upper()}, "
            f"seed {spec.seed}"
        )
        self.info = dict(spec.to_json(), segments=segments)
        self.board = None
        if out is not None:
            self.board = TensorBoardLog(out, self.per_update, done)

    def earlier_metrics(self, done: int) -> dict[str, np.ndarray]:
        """The metrics of updates ``1 ... done`` already in ``metrics.jsonl``."""
        if self.out is None or not done:
            return {}
        rows = artifacts.read_metrics(self.out / artifacts.METRICS_FILE)
        return artifacts.rows_to_metrics(rows)

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
