"""What a run returns: ``RunResult``."""

from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ondevice_rl.train.kit.registry import algorithm_of


class RunResult(NamedTuple):
    """What ``train_from_config``, ``resume_training`` and
    ``ondevice_rl.run_training`` return; its ``repr`` is a short summary.

    Attributes:
        metrics: name -> ``[R]`` float32 host array, one row per
            ``log_every`` updates (``ondevice_rl.metrics.log_rows``; earlier
            ones included when resumed).
        final_return: ``ondevice_rl.metrics.final_return`` of the last
            updates' own ``episode_return`` values (not of the rows; NaN if
            no update completed).
        compile_s: seconds spent compiling (0 for cached programs).
        run_s: seconds spent running this call's segments.
        sps: env steps per second over ``run_s``.
        env_steps: env steps done in all (``updates * config.steps_per_update``).
        out_dir: where files were written, or None.
        state: the final train state (on device).
        interrupted: stopped early by Ctrl-C or SIGTERM.
        stop_signal: that signal's number, or None.
        nonfinite: what the NaN guard found ("non-finite X at update N"), or
            None.
        resumed_from: the update the run continued from (0: a fresh run).
        checkpoint: the update of the last checkpoint written, or None.
        config: the run's config (the stored one when resumed).
        updates: ``[R]`` int64, the last update each row covers (1-based).
        write_s: seconds of ``run_s`` spent writing rows (files, loggers).
    """

    metrics: dict[str, np.ndarray]
    final_return: float
    compile_s: float
    run_s: float
    sps: float
    env_steps: int
    out_dir: Path | None
    state: Any
    interrupted: bool = False
    stop_signal: int | None = None
    nonfinite: str | None = None
    resumed_from: int = 0
    checkpoint: int | None = None
    config: Any = None
    updates: np.ndarray | None = None
    write_s: float = 0.0

    def __repr__(self) -> str:
        config = self.config
        what = f"{config.env} {algorithm_of(config).name}" if config else "run"
        status = (
            "stopped: " + self.nonfinite
            if self.nonfinite
            else "interrupted"
            if self.interrupted
            else "finished"
        )
        rows = len(self.updates) if self.updates is not None else 0
        return (
            f"RunResult({what}, {status}\n"
            f"  out_dir={str(self.out_dir) if self.out_dir else None!r}\n"
            f"  final_return={self.final_return:.2f}, "
            f"env_steps={self.env_steps:,}\n"
            f"  compile_s={self.compile_s:.1f}, run_s={self.run_s:.1f}, "
            f"sps={self.sps:,.0f}\n"
            f"  metrics: {len(self.metrics)} x {rows} rows; .state: the train state)"
        )
