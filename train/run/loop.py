"""Compile and run a run's segments (``runner.py`` sets the run up and
finishes it).

``compile_run`` compiles the plan's segment programs (or takes them from the
process's cache) and the state they start from. ``run_segments`` runs them:
after each, its rows are kept and written, the progress bar moves, a
checkpoint is written when due (with the final window of per-update returns
in ``config.json``) and ``on_segment`` is called; it stops early on a stop
request or a non-finite value. When the first segment takes more than
``SEGMENT_SECONDS``, the rest of the run is re-planned with segments of
``L / 2^k`` updates that fit (``plan.shorter_length``, unless the caller
chose the number of segments): one more compiled length at most, so
progress and checkpoints come at least about that often.
"""

import dataclasses
import math
import signal
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ondevice_rl.files.checkpoint import Checkpoints
from ondevice_rl.train.run import recovery
from ondevice_rl.train.run.checks import CHECKPOINT_SECONDS, SEGMENT_SECONDS
from ondevice_rl.train.run.compile import ProgramInputs, compile_programs
from ondevice_rl.train.run.plan import Segment, grain, plan_segments, shorter_length
from ondevice_rl.train.run.rows import RowLog
from ondevice_rl.train.run.run_files import RunFiles
from ondevice_rl.train.run.run_spec import RunSpec
from ondevice_rl.train.run.segments import EVAL_METRIC
from ondevice_rl.train.services.progress import ProgressBar

#: ``on_segment(updates_done, env_steps, latest_episode_return)``.
SegmentCallback = Callable[[int, int, float], None]


class Options(NamedTuple):
    progress: bool
    on_segment: SegmentCallback | None
    checkpoint_every: int | None
    resize: bool  # segments may be made shorter (SEGMENT_SECONDS)


@dataclasses.dataclass
class Run:
    """One call's host-side bookkeeping, filled in as the run goes."""

    spec: RunSpec
    plan: list[Segment]  # the segments still to run
    files: RunFiles
    checkpoints: Checkpoints | None
    bar: ProgressBar
    done: int  # updates completed
    resumed_from: int
    rows: RowLog
    programs: Any = None
    state: Any = None
    compile_s: float = 0.0
    run_s: float = 0.0
    write_s: float = 0.0  # of run_s, writing rows
    saved: int | None = None  # the update of the last checkpoint written
    stopped: int | None = None  # the signal that stopped the run
    nonfinite: str | None = None
    write_error: OSError | None = None  # a failed write that stopped the run
    notices: list[str] = dataclasses.field(default_factory=list)


def plan(spec: RunSpec, done: int) -> list[Segment]:
    """The segments from update ``done`` on."""
    config = spec.config
    return plan_segments(
        config.num_updates, spec.segment_length, spec.eval_every, done, spec.log_every
    )


def compile_run(run: Run) -> None:
    """Compiles (or takes from the cache) the plan's programs; the state
    they start from, restored from the checkpoint when resuming."""
    inputs = ProgramInputs.for_run(run.spec, [s.program for s in run.plan])
    run.bar.log(f"compiling {len(inputs.shapes)} segment program(s)...")
    run.programs, run.compile_s = compile_programs(inputs)
    run.bar.log(f"compiled in {run.compile_s:.1f} s")
    run.state = run.programs.initial_state()
    if run.done:
        restored = run.checkpoints.restore(run.done, run.state)
        run.state = run.programs.place(restored)
        run.bar.log(f"resumed from update {run.done}")


def run_segments(run: Run, stop, options: Options) -> None:
    """Runs the planned segments; after each: its rows, the progress bar, a
    checkpoint when due, ``on_segment``; after the first, shorter segments
    if it took too long. Stops early on a stop request or a non-finite
    value."""
    per_update, every = run.spec.config.steps_per_update, options.checkpoint_every
    start = last_save = time.perf_counter()
    compiled = run.compile_s  # more compiles on the way are not run time
    run.bar.update(run.done * per_update, math.nan, 0.0)
    first = True
    try:
        while run.plan:
            segment = run.plan.pop(0)
            if stop():
                break
            began = time.perf_counter()
            run.state, result = run.programs.run(run.state, segment)
            seconds = time.perf_counter() - began
            _record(run, result, segment, segment.length * per_update / seconds)
            if result.nonfinite:
                run.bar.log(f"stopping: {result.nonfinite}", True)
                run.nonfinite = result.nonfinite
                break
            latest = run.rows.latest_return
            run.bar.update(run.done * per_update, latest, time.perf_counter() - start)
            if every:
                due = run.done // every > segment.start // every
            else:
                due = time.perf_counter() - last_save >= CHECKPOINT_SECONDS
            if due or run.done == run.spec.config.num_updates or stop():
                save(run)
                last_save = time.perf_counter()
            if options.on_segment is not None:
                options.on_segment(run.done, run.done * per_update, latest)
            if first and options.resize and run.plan:
                _shorten(run, segment, seconds)
            first = False
    except KeyboardInterrupt:
        stop.signal = stop.signal or signal.SIGINT
    except OSError as e:
        run.write_error = e
    run.stopped = stop.signal
    if run.rows.chunks and not (run.nonfinite or run.write_error):
        if run.saved != run.done:
            try:
                save(run)  # stopped from on_segment
            except OSError as e:
                run.write_error = e
    run.run_s = time.perf_counter() - start - (run.compile_s - compiled)


def _shorten(run: Run, segment: Segment, seconds: float) -> None:
    """Re-plans the rest in shorter segments if ``segment`` took longer than
    ``SEGMENT_SECONDS``; compiles them (counted as compile time)."""
    spec, config = run.spec, run.spec.config
    step = grain(config.num_updates, spec.eval_every, spec.log_every)
    length = shorter_length(segment.length, seconds, SEGMENT_SECONDS, step)
    if length >= segment.length:
        return
    run.spec = spec = spec._replace(segment_length=length)
    run.plan = plan(spec, run.done)
    run.files.info["segment_length"] = length
    lengths = run.files.info["segments"][:1] + [s.length for s in run.plan]
    run.files.start(lengths, run.done)
    run.bar.log(f"segments of {length} updates from here (one took {seconds:.0f} s)")
    before = run.compile_s
    _compile_more(run)
    run.bar.log(f"compiled in {run.compile_s - before:.1f} s")


def _compile_more(run: Run) -> None:
    """Adds the programs of the re-planned segments to ``run.programs``."""
    programs = run.programs
    missing = {s.program for s in run.plan} - set(programs.segments)
    more, seconds = compile_programs(ProgramInputs.for_run(run.spec, missing))
    run.programs = programs._replace(segments={**programs.segments, **more.segments})
    run.compile_s += seconds


def _record(run: Run, result, segment: Segment, sps: float) -> None:
    """A finished segment's rows: kept, written, evaluations told."""
    began = time.perf_counter()
    run.rows.add(result)
    run.files.append(result.rows, result.updates, sps)
    run.done = segment.start + segment.length
    evals = result.rows.get(EVAL_METRIC, [])
    for i in np.flatnonzero(np.isfinite(evals)):
        run.bar.log(f"update {result.updates[i]}: eval return {evals[i]:.2f}")
    run.write_s += time.perf_counter() - began


def save(run: Run) -> None:
    if run.checkpoints is not None:
        run.files.sync()
        recovery.save(run.checkpoints, run.done, run.state)
        run.saved = run.done
        run.files.checkpointed(run.done, run.rows.tail)
