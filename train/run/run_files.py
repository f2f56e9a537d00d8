"""What a training run writes into its directory as it goes (or nothing,
for a run without one): ``config.json`` with its status, ``metrics.jsonl``
and TensorBoard scalars appended per segment (and W&B's, when a
``WandbLog`` is given, with or without a directory), ``curve.png`` at the
end. Checkpoints are the runner's (``train/run/runner.py``).

A failed write raises ``OSError`` with the file it was writing as its
``filename``; ``DirectoryGone`` when the directory was removed or moved
since the run opened it (each write checks first, so that nothing is
written into a directory made in its place). A resumed run's
``config.json`` keeps a ``resumes`` list: the update each resume started
from and what it changed or skipped. At each checkpoint ``config.json``
also keeps the last ``FINAL_WINDOW`` updates' own ``episode_return``
values (``final_window``, by checkpoint update): a resume's final return
then reads full-resolution values, not rows.
"""

import contextlib
import errno
import os
from pathlib import Path
from typing import Any

import numpy as np

from ondevice_rl.train.kit.registry import algorithm_of
from ondevice_rl.train.run import artifacts
from ondevice_rl.train.services.tensorboard import TensorBoardLog
from ondevice_rl.train.services.writes import writing

#: Final windows kept in ``config.json``: one per checkpoint kept, and more.
_KEEP_WINDOWS = 8


class DirectoryGone(FileNotFoundError):
    """The run's directory was removed or moved while the run wrote to it."""


def _identity(path: Path) -> tuple[int, int] | None:
    """``path``'s device and inode (None if it is gone)."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_dev, stat.st_ino


def summary(result: Any, status: str) -> dict[str, Any]:
    """What ``config.json`` records when a call ends (``result``: its
    ``RunResult``)."""
    updates = result.updates
    return dict(
        status=status,
        updates=int(updates[-1]) if updates is not None and len(updates) else 0,
        env_steps=result.env_steps,
        compile_s=result.compile_s,
        run_s=result.run_s,
        write_s=result.write_s,
        sps=result.sps,
        final_return=result.final_return,
        checkpoint=result.checkpoint,
        nonfinite=result.nonfinite,
    )


def _stored_tail(stored: dict, done: int, earlier: dict, log_every: int) -> list:
    """The final window's values stored at checkpoint ``done``; a run
    written before they were stored logged every update: its rows hold
    them."""
    windows = stored.get("final_window")
    tail = windows.get(str(done)) if isinstance(windows, dict) else None
    if isinstance(tail, list) and all(isinstance(x, int | float) for x in tail):
        return [float(x) for x in tail]
    returns = earlier.get("episode_return", np.zeros(0))
    return [float(x) for x in returns[np.isfinite(returns)]] if log_every == 1 else []


class RunFiles:
    """The files of one run in ``out`` (every file method a no-op if ``out``
    is None) and its ``wandb`` log, if any. ``done`` is the update the run
    starts (or resumes) from: a fresh run starts an empty ``metrics.jsonl``,
    a resumed one keeps its rows up to update ``done`` (``earlier``, ``name ->
    [R]``, ``earlier_updates`` ``[R]``, ``earlier_tail`` the final window at
    ``done``) and drops any later ones (RunDirError if they do not end at
    ``done``, or a bad line)."""

    def __init__(
        self,
        out: Path | None,
        spec: Any,
        done: int,
        resumed: bool = False,
        wandb: Any = None,
    ):
        self.out = out
        self.wandb = wandb
        self.per_update = spec.config.steps_per_update
        self.title = (
            f"{spec.config.env} {algorithm_of(spec.config).name.upper()}, "
            f"seed {spec.seed}"
        )
        self.info = spec.to_json()
        self.earlier: dict[str, np.ndarray] = {}
        self.earlier_updates = np.zeros(0, np.int64)
        self.earlier_tail: list[float] = []
        self.board = None
        if out is None:
            return
        self._identity = _identity(out)
        path = out / artifacts.METRICS_FILE
        stored = {}
        if resumed:
            stored = artifacts.read_json(out / artifacts.CONFIG_FILE)
            earlier = stored.get("resumes")
            self.info["resumes"] = list(earlier) if isinstance(earlier, list) else []
            self.note_resume(
                from_update=done, total_timesteps=spec.config.total_timesteps
            )
        with writing(path):
            if done:
                rows = artifacts.truncate_metrics(path, done)
                self.earlier = artifacts.rows_to_metrics(rows)
                self.earlier_updates = np.asarray([r["update"] for r in rows])
                self.earlier_tail = _stored_tail(
                    stored, done, self.earlier, spec.log_every
                )
            else:
                path.write_text("")
        if self.earlier_tail:
            self.info["final_window"] = {str(done): self.earlier_tail}
        with writing(out):
            self.board = TensorBoardLog(out, self.per_update, done)

    def check_place(self) -> None:
        """``DirectoryGone`` unless ``out`` is still the directory the run
        opened."""
        if self.out is not None and _identity(self.out) != self._identity:
            raise DirectoryGone(
                errno.ENOENT,
                "removed or moved while the run wrote to it",
                str(self.out),
            )

    def note_resume(self, **fields: Any) -> None:
        """Adds ``fields`` to this resume's entry in ``config.json``."""
        if self.out is not None:
            resumes = self.info["resumes"]
            if fields.get("from_update") is not None or not resumes:
                resumes.append({})
            resumes[-1].update(fields)

    def start(self, segments: list[int], done: int) -> None:
        """``config.json`` says the run is running, from update ``done``, in
        segments of these lengths."""
        self.info["segments"] = segments
        self.status(status="running", updates=done)

    def status(self, **fields: Any) -> None:
        """Rewrites ``config.json``: the run's spec plus ``fields``."""
        if self.out is not None:
            self.check_place()
            path = self.out / artifacts.CONFIG_FILE
            with writing(path):
                artifacts.write_json(path, dict(self.info, **fields))

    def append(
        self, rows: dict[str, np.ndarray], updates: np.ndarray, sps: float
    ) -> None:
        """A segment's ``[R]`` rows, ending at ``updates``; ``sps``: its
        steps per second."""
        if self.out is not None:
            self.check_place()
            path = self.out / artifacts.METRICS_FILE
            with writing(path):
                artifacts.append_metrics(
                    path, rows, self.per_update, 0, updates, sync=False
                )
            with writing(self.out):
                self.board.append(rows, updates, sps)
        if self.wandb is not None:
            self.wandb.append(rows, updates, sps)

    def sync(self) -> None:
        """Makes the rows written so far durable (before a checkpoint: a
        resume from it finds its rows even after a power cut)."""
        if self.out is not None:
            self.check_place()
            path = self.out / artifacts.METRICS_FILE
            with writing(path), path.open("a") as f:
                os.fsync(f.fileno())

    def checkpointed(self, update: int, tail: list[float]) -> None:
        """A checkpoint of update ``update`` was written: ``config.json``
        keeps ``tail`` (the final window there) for a resume from it."""
        if self.out is not None:
            windows = dict(self.info.get("final_window", {}))
            windows[str(update)] = [float(x) for x in tail]
            recent = sorted(windows, key=int)[-_KEEP_WINDOWS:]
            self.info["final_window"] = {k: windows[k] for k in recent}
            self.status(status="running", updates=update)

    def finish(
        self,
        metrics: dict[str, np.ndarray] | None,
        row_updates: np.ndarray | None = None,
        **status: Any,
    ) -> None:
        """The curve of the ``[R]`` rows ending at ``row_updates`` (unless
        ``metrics`` is None: a failed run), the final ``config.json``; closes
        the event files and the W&B run."""
        if self.wandb is not None:
            wandb, self.wandb = self.wandb, None
            wandb.finish(status)
        if self.out is None:
            return
        board, self.board = self.board, None
        if board is not None:
            with contextlib.suppress(OSError):
                board.close()
        if metrics is not None:
            self.check_place()
            path = self.out / artifacts.CURVE_FILE
            steps = np.asarray(row_updates, np.int64) * self.per_update
            with writing(path):
                artifacts.plot_curve(path, metrics, steps, self.title)
        self.status(**status)
