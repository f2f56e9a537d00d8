"""What ``ondevice-rl train`` prints when a run ends, and its exit status."""

import sys
from pathlib import Path

import numpy as np

from ondevice_rl.metrics import FINAL_WINDOW
from ondevice_rl.train.kit.registry import algorithm_of
from ondevice_rl.train.run.artifacts import (
    CHECKPOINT_DIR,
    CONFIG_FILE,
    CURVE_FILE,
    METRICS_FILE,
)
from ondevice_rl.train.services.interrupt import EXIT_STATUS

RUN_FILES = (CONFIG_FILE, METRICS_FILE, CURVE_FILE, f"{CHECKPOINT_DIR}/")


def report(result, cache: Path | None) -> int:
    """Prints a finished ``RunResult``'s summary (``cache``: the compilation
    cache's directory, if on); returns the exit status: 0 done, 3 stopped
    on non-finite values, the signal's status if interrupted (the command
    to resume on stderr)."""
    config = result.config
    updates = result.env_steps // config.steps_per_update
    status = (
        "stopped (non-finite values)"
        if result.nonfinite
        else "interrupted"
        if result.interrupted
        else "done"
    )
    print(
        f"{config.env} ({algorithm_of(config).name}): {status} after "
        f"{updates}/{config.num_updates} updates, "
        f"{result.env_steps:,} env steps"
    )
    print(
        f"  compile       {result.compile_s:8.2f} s"
        + (f"   (cache: {cache})" if cache else "")
    )
    print(f"  run           {result.run_s:8.2f} s   ({result.sps:,.0f} steps/s)")
    print(
        f"  final return  {result.final_return:8.2f}   (mean of the last "
        f"{min(updates, FINAL_WINDOW)} updates)"
    )
    evals = result.metrics.get("eval_return")
    if evals is not None and np.isfinite(evals).any():
        at = int(np.flatnonzero(np.isfinite(evals))[-1])
        update = result.updates[at]
        print(f"  eval return   {evals[at]:8.2f}   (deterministic, update {update})")
    if result.out_dir is not None:
        print(f"  files         {result.out_dir}/ ({', '.join(RUN_FILES)})")
    where = result.out_dir
    if result.nonfinite:
        kept = (
            f"last good checkpoint: update {result.checkpoint}"
            if result.checkpoint
            else "no checkpoint kept"
        )
        print(f"ondevice-rl train: {result.nonfinite}; {kept}", file=sys.stderr)
        return 3
    if result.interrupted:
        if where is not None:
            print(
                f"stopped at update {updates}/{config.num_updates}; resume with: "
                f"ondevice-rl train --resume {where}",
                file=sys.stderr,
            )
        return EXIT_STATUS.get(result.stop_signal, 130)
    return 0
