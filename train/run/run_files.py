"""What a training run writes into its directory as it goes (or nothing,
for a run without one): ``config.json`` with its status, ``metrics.jsonl``
and TensorBoard scalars appended per segment, ``curve.png`` at the end.
Checkpoints are the runner's (``train/run/runner.py``).

A failed write raises ``OSError`` with the file it was writing as its
``filename``. A resumed run's ``config.json`` keeps a ``resumes`` list: the
update each resume started from and what it changed or skipped.
"""

import contextlib
from pathlib import Path
from typing import Any

import numpy as np

from ondevice_rl.train.kit.registry import algorithm_of
from ondevice_rl.train.run import artifacts
from ondevice_rl.train.services.tensorboard import TensorBoardLog


def summary(result: Any, status: str) -> dict[str, Any]:
    """What ``config.json`` records when a call ends (``result``: its
    ``RunResult``)."""
    return dict(
        status=status,
        updates=len(result.metrics.get("episode_return", [])),
        env_steps=result.env_steps,
        compile_s=result.compile_s,
        run_s=result.run_s,
        sps=result.sps,
        final_return=result.final_return,
        checkpoint=result.checkpoint,
        nonfinite=result.nonfinite,
    )


@contextlib.contextmanager
def _writing(path: Path):
    """Names ``path`` in an ``OSError`` raised without a file name."""
    try:
        yield
    except OSError as e:
        e.filename = e.filename or str(path)
        raise


class RunFiles:
    """The files of one run in ``out`` (every method a no-op if ``out`` is
    None). ``done`` is the update the run starts (or resumes) from: a fresh
    run starts an empty ``metrics.jsonl``, a resumed one keeps its first
    ``done`` rows (``earlier``, ``name -> [done]``) and drops any later ones
    (RunDirError if it holds fewer, or a bad line)."""

    def __init__(self, out: Path | None, spec: Any, done: int, resumed: bool = False):
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
        if resumed:
            stored = artifacts.read_json(out / artifacts.CONFIG_FILE)
            earlier = stored.get("resumes")
            self.info["resumes"] = list(earlier) if isinstance(earlier, list) else []
            self.note_resume(
                from_update=done, total_timesteps=spec.config.total_timesteps
            )
        with _writing(path):
            if done:
                rows = artifacts.truncate_metrics(path, done)
                self.earlier = artifacts.rows_to_metrics(rows)
            else:
                path.write_text("")
        with _writing(out):
            self.board = TensorBoardLog(out, self.per_update, done)

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
            path = self.out / artifacts.CONFIG_FILE
            with _writing(path):
                artifacts.write_json(path, dict(self.info, **fields))

    def append(self, metrics: dict[str, np.ndarray], done: int) -> None:
        """A segment's ``[n]`` metrics, updates ``done + 1 ... done + n``."""
        if self.out is not None:
            path = self.out / artifacts.METRICS_FILE
            with _writing(path):
                artifacts.append_metrics(path, metrics, self.per_update, done)
            with _writing(self.out):
                self.board.append(metrics, done)

    def finish(self, metrics: dict[str, np.ndarray] | None, **status: Any) -> None:
        """The curve (unless ``metrics`` is None: a failed run), the final
        ``config.json``; closes the event files."""
        if self.out is None:
            return
        board, self.board = self.board, None
        if board is not None:
            with contextlib.suppress(OSError):
                board.close()
        if metrics is not None:
            path = self.out / artifacts.CURVE_FILE
            with _writing(path):
                artifacts.plot_curve(path, metrics, self.per_update, self.title)
        self.status(**status)
