"""Run one configuration of any registered learner as a few compiled
segments, the state left on the device, nothing lost on the way.

A run reads top to bottom: check the arguments once (``RunSpec.create``,
``train/run/checks.py``) → plan the segments once (``train/run/plan.py``) →
compile (``train/run/segments.py``) → loop: run a segment, write its rows,
checkpoint when due → finish: summary, curve. Between segments the host
fetches the segment's metrics (a few floats per update), appends them to
``metrics.jsonl`` and TensorBoard's event files (``train/run/run_files.py``)
and moves the progress bar. Nothing calls back to the host inside the
compiled code.

* Checkpoints (orbax, the whole train state: params, optimiser state, env
  states, PRNG keys, any replay buffer, the update counter): every
  ``checkpoint_every`` updates, or by default at the first segment boundary
  at least ``CHECKPOINT_SECONDS`` after the previous one; always at the end
  and when stopped. The last ``KEEP_CHECKPOINTS`` are kept.
* Stops: a first Ctrl-C or SIGTERM finishes the running segment, then
  checkpoints and writes everything; a second one exits at once (the last
  checkpoint stays). ``resume_training`` continues from the latest
  checkpoint; on CPU the result equals the uninterrupted run's exactly.
* Damage and concurrency (``train/run/recovery.py``): the run directory is
  locked before anything compiles (``train/run/lock.py``); a resume starts
  from the newest checkpoint that verifies, newer ones moved aside; a failed
  write stops the run in one line (``RunWriteError``).
* NaN guard: every segment also returns whether all parameters are still
  finite; with the per-update losses this names the first bad update and
  metric. The run then stops without checkpointing the bad state.
* Periodic evaluation (``eval_every=N``): inside the segment programs, after
  every N-th update, ``eval_episodes`` deterministic episodes of the current
  policy; their mean return is the metric ``eval_return`` (NaN, written
  null, at other updates; the NaN guard skips it).
"""

import contextlib
import dataclasses
import math
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np

from ondevice_rl.checkpoint import Checkpoints
from ondevice_rl.metrics import final_return
from ondevice_rl.train.kit.registry import algorithm_of
from ondevice_rl.train.run import artifacts, recovery
from ondevice_rl.train.run.checks import CHECKPOINT_SECONDS, check_run_args
from ondevice_rl.train.run.lock import DirLock
from ondevice_rl.train.run.plan import Segment, plan_segments
from ondevice_rl.train.run.recovery import RunWriteError
from ondevice_rl.train.run.run_files import RunFiles, summary
from ondevice_rl.train.run.run_spec import RunResult, RunSpec
from ondevice_rl.train.run.segments import EVAL_METRIC, Evaluation, compile_programs
from ondevice_rl.train.services.interrupt import stop_at_boundary
from ondevice_rl.train.services.memory import check_fits
from ondevice_rl.train.services.progress import ProgressBar

KEEP_CHECKPOINTS = 3
STOP_MESSAGE = "stopping after this segment (again to stop now)"

#: ``on_segment(updates_done, env_steps, latest_episode_return)``.
SegmentCallback = Callable[[int, int, float], None]


def run_training(
    config: Any,
    *,
    seed: int = 0,
    out_dir: str | Path | None = None,
    num_segments: int | None = None,
    progress: bool = True,
    hyperparams: Any = None,
    env_params: Any = None,
    on_segment: SegmentCallback | None = None,
    checkpoint_every: int | None = None,
    force: bool = False,
    eval_every: int | None = None,
    eval_episodes: int | None = None,
) -> RunResult:
    """Trains ``config`` (any registered learner's) from
    ``jax.random.key(seed)``: the same numbers as ``jax.jit(make_train(config))
    (key, hp, env_params)``, in segments.

    Args:
        seed: in ``[0, 2^32)``.
        num_segments: how many segments to cut the run into (default 20).
        hyperparams: the learner's ``Hyperparams`` or a mapping overriding
            some of ``config``'s defaults.
        env_params: the env's params (default: its defaults).
        on_segment: called after each segment with ``(updates_done,
            env_steps, latest_episode_return)``; raising KeyboardInterrupt
            there stops the run like Ctrl-C.
        out_dir: receives ``config.json``, ``metrics.jsonl`` (appended per
            segment), TensorBoard event files, ``curve.png`` and
            ``checkpoint/``. A directory holding an earlier run is refused
            unless ``force`` (replace it).
        checkpoint_every: updates between checkpoints (default: time-based,
            see the module docstring).
        eval_every: evaluate the policy after every ``eval_every``-th update
            inside the program (``metrics["eval_return"]``); None: never.
        eval_episodes: deterministic episodes per evaluation (default 10;
            only with ``eval_every``).

    Raises:
        ValueError: one line, before compiling: a bad argument
            (``RunArgError``), hyperparameter, env param or output directory
            (``RunDirError``; ``DirInUse`` when another process writes it),
            an env the learner cannot act in, or a state that would not fit
            in device memory.
        KeyError: an unknown env.
        RunWriteError: a write into ``out_dir`` failed and stopped the run.
    """
    check_run_args(checkpoint_every=checkpoint_every)
    spec = RunSpec.create(
        config,
        seed=seed,
        hyperparams=hyperparams,
        env_params=env_params,
        num_segments=num_segments,
        eval_every=eval_every,
        eval_episodes=eval_episodes,
    )
    check_fits(config)
    out = Path(out_dir) if out_dir is not None else None
    with DirLock(out) if out is not None else contextlib.nullcontext():
        if out is not None:
            artifacts.prepare_run_dir(out, force=force)
        return _train(spec, out, False, progress, on_segment, checkpoint_every)


def resume_training(
    out_dir: str | Path,
    *,
    total_timesteps: int | None = None,
    progress: bool = True,
    on_segment: SegmentCallback | None = None,
    checkpoint_every: int | None = None,
) -> RunResult:
    """Continues the run in ``out_dir`` from its newest checkpoint that
    verifies, with the config, hyperparameters, seed and env params stored
    there; ``total_timesteps`` may extend it (never shorten it).

    Raises:
        RunDirError: one line, before compiling: not a run, a damaged
            ``config.json`` or ``metrics.jsonl``, checkpoints none of which
            verifies (nothing moved then), another process writing there.
        RunWriteError: as ``run_training``.
    """
    check_run_args(checkpoint_every=checkpoint_every)
    out = Path(out_dir)
    spec = RunSpec.stored_in(out)
    if total_timesteps is not None:
        spec = spec.extended(total_timesteps)
    with DirLock(out, "--resume"):
        return _train(spec, out, True, progress, on_segment, checkpoint_every)


@dataclasses.dataclass
class _Run:
    """One call's host-side bookkeeping, filled in as the run goes."""

    spec: RunSpec
    plan: list[Segment]  # the segments still to run
    files: RunFiles
    checkpoints: Checkpoints | None
    bar: ProgressBar
    done: int  # updates completed
    resumed_from: int
    programs: Any = None
    state: Any = None
    compile_s: float = 0.0
    run_s: float = 0.0
    chunks: list[dict[str, np.ndarray]] = dataclasses.field(default_factory=list)
    saved: int | None = None  # the update of the last checkpoint written
    stopped: int | None = None  # the signal that stopped the run
    nonfinite: str | None = None
    write_error: OSError | None = None  # a failed write that stopped the run
    notices: list[str] = dataclasses.field(default_factory=list)


def _train(spec, out, resume, progress, on_segment, checkpoint_every) -> RunResult:
    """Sets up, compiles, loops over the segments, finishes."""
    checkpoints = None
    if out is not None:
        checkpoints = Checkpoints(out / artifacts.CHECKPOINT_DIR, KEEP_CHECKPOINTS)
    with checkpoints or contextlib.nullcontext():
        try:
            run = _setup(spec, out, checkpoints, resume, progress)
        except OSError as e:
            raise RunWriteError(
                e.errno, f"cannot write {recovery.where(e, out)}"
            ) from e
        notify = lambda message: run.bar.log(message, True)  # noqa: E731
        with run.bar, stop_at_boundary(notify, STOP_MESSAGE) as stop:
            for line in run.notices:
                notify(line)
            _compile(run)
            _loop(run, stop, on_segment, checkpoint_every)
    return _finish(run)


def _setup(spec, out, checkpoints, resume, progress) -> _Run:
    """Plans the segments (from the newest verified checkpoint when
    resuming, newer damaged ones moved aside) and opens the run's files and
    progress bar; nothing compiled yet."""
    config = spec.config
    done, skipped = recovery.resume_point(spec, checkpoints) if resume else (0, [])
    files = RunFiles(out, spec, done, resumed=resume)
    notices = [recovery.set_aside(checkpoints, skipped, files, done)] if skipped else []
    plan = plan_segments(config.num_updates, spec.segment_length, spec.eval_every, done)
    files.start([s.length for s in plan], done)
    label = f"{config.env} {algorithm_of(config).name}"
    steps = config.num_updates * config.steps_per_update
    bar = ProgressBar(steps, label, enabled=progress)
    return _Run(spec, plan, files, checkpoints, bar, done, done, notices=notices)


def _compile(run: _Run) -> None:
    """Compiles (or takes from the cache) the plan's programs; the state
    they start from, restored from the checkpoint when resuming."""
    spec = run.spec
    shapes = sorted({s.program for s in run.plan})
    evaluation = None
    if spec.eval_every is not None:
        evaluation = Evaluation(spec.eval_every, spec.eval_episodes)
    run.bar.log(f"compiling {len(shapes)} segment program(s)...")
    key = jax.random.key(spec.seed)
    run.programs, run.compile_s = compile_programs(
        spec.config, key, spec.hyperparams, spec.env_params_tree(), shapes, evaluation
    )
    run.bar.log(f"compiled in {run.compile_s:.1f} s")
    run.state = run.programs.initial_state()
    if run.done:
        run.state = run.checkpoints.restore(run.done, run.state)
        run.bar.log(f"resumed from update {run.done}")


def _loop(run: _Run, stop, on_segment, checkpoint_every) -> None:
    """Runs the planned segments; after each: its rows, the progress bar, a
    checkpoint when due, ``on_segment``. Stops early on a stop request or a
    non-finite value."""
    per_update = run.spec.config.steps_per_update
    start = last_save = time.perf_counter()
    run.bar.update(run.done * per_update, math.nan, 0.0)
    try:
        for segment in run.plan:
            if stop():
                break
            run.state, metrics, run.nonfinite = run.programs.run(run.state, segment)
            _record(run, metrics, segment)
            if run.nonfinite:
                run.bar.log(f"stopping: {run.nonfinite}", True)
                break
            latest = float(metrics["episode_return"][-1])
            run.bar.update(run.done * per_update, latest, time.perf_counter() - start)
            if checkpoint_every:
                due = run.done // checkpoint_every > segment.start // checkpoint_every
            else:
                due = time.perf_counter() - last_save >= CHECKPOINT_SECONDS
            if due or run.done == run.spec.config.num_updates or stop():
                _save(run)
                last_save = time.perf_counter()
            if on_segment is not None:
                on_segment(run.done, run.done * per_update, latest)
    except KeyboardInterrupt:
        stop.signal = stop.signal or signal.SIGINT
    except OSError as e:
        run.write_error = e
    run.stopped = stop.signal
    if run.chunks and not (run.nonfinite or run.write_error) and run.saved != run.done:
        try:
            _save(run)  # stopped from on_segment
        except OSError as e:
            run.write_error = e
    run.run_s = time.perf_counter() - start


def _record(run: _Run, metrics: dict[str, np.ndarray], segment: Segment) -> None:
    """A finished segment's ``[n]`` metrics: kept, written, evaluations told."""
    run.chunks.append(metrics)
    run.files.append(metrics, segment.start)
    run.done = segment.start + segment.length
    evals = metrics.get(EVAL_METRIC, [])
    for i in np.flatnonzero(np.isfinite(evals)):
        run.bar.log(f"update {segment.start + i + 1}: eval return {evals[i]:.2f}")


def _save(run: _Run) -> None:
    if run.checkpoints is not None:
        recovery.save(run.checkpoints, run.done, run.state)
        run.saved = run.done


def _finish(run: _Run) -> RunResult:
    """Every update's metrics (earlier ones too when resumed), the summary
    in ``config.json``, the curve; the result."""
    config, per_update = run.spec.config, run.spec.config.steps_per_update
    earlier = run.files.earlier
    names = run.chunks[0] if run.chunks else earlier
    empty = np.zeros(0, np.float32)
    metrics = {
        k: np.concatenate([earlier.get(k, empty)] + [c[k] for c in run.chunks])
        for k in names
    }
    this_run = sum(len(c["episode_return"]) for c in run.chunks) * per_update
    returns = metrics.get("episode_return", empty)
    result = RunResult(
        metrics=metrics,
        final_return=final_return(returns),
        compile_s=run.compile_s,
        run_s=run.run_s,
        sps=this_run / run.run_s if run.run_s > 0 else 0.0,
        env_steps=len(returns) * per_update,
        out_dir=run.files.out,
        state=run.state,
        interrupted=run.stopped is not None,
        stop_signal=run.stopped,
        nonfinite=run.nonfinite,
        resumed_from=run.resumed_from,
        checkpoint=run.saved,
        config=config,
    )
    failed, stopped = run.nonfinite or run.write_error, run.stopped
    status = "failed" if failed else "interrupted" if stopped else "finished"
    if run.write_error is None:
        try:
            run.files.finish(metrics, **summary(result, status))
            return result
        except OSError as e:
            run.write_error = e
    kept = run.saved if run.saved is not None else run.resumed_from
    raise recovery.failure(
        run.write_error, run.files, summary(result, "failed"), run.done, kept
    )
