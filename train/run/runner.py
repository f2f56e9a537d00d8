"""Run one configuration of any registered learner as a few compiled
segments, the state left on the device, nothing lost on the way.

A run reads top to bottom: check the arguments once (``RunSpec.create``,
``train/run/checks.py``) → plan the segments once (``train/run/plan.py``) →
compile (``train/run/segments.py``) → loop (``train/run/loop.py``): run a
segment, write its rows, checkpoint when due → finish: summary, curve.
Between segments the host fetches the segment's rows (one per ``log_every``
updates, reduced in the program), appends them to ``metrics.jsonl``,
TensorBoard's event files and any W&B run (``train/run/run_files.py``) and
moves the progress bar (without a terminal, prints a progress line). Nothing
calls back to the host inside the compiled code.

* Segment length: when a segment takes more than ``loop.SEGMENT_SECONDS``
  (and ``num_segments`` was not given), the rest of the run is re-planned
  with shorter segments (``plan.shorter_length``).
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
  finite and where each metric first was not; this names the first bad
  update and metric. The run then stops without checkpointing the bad state.
* Periodic evaluation (``eval_every=N``): inside the segment programs, after
  every N-th update, ``eval_episodes`` deterministic episodes of the current
  policy; their mean return is the metric ``eval_return`` (NaN, written
  null, at other updates; the NaN guard skips it).
"""

import contextlib
from pathlib import Path
from typing import Any

from ondevice_rl.files.checkpoint import Checkpoints
from ondevice_rl.train.kit.registry import algorithm_of
from ondevice_rl.train.run import artifacts, recovery
from ondevice_rl.train.run.checks import check_run_args
from ondevice_rl.train.run.lock import DirLock
from ondevice_rl.train.run.loop import (
    Options,
    Run,
    SegmentCallback,
    compile_run,
    plan,
    run_segments,
)
from ondevice_rl.train.run.recovery import RunWriteError
from ondevice_rl.train.run.rows import RowLog
from ondevice_rl.train.run.run_files import RunFiles, summary
from ondevice_rl.train.run.run_spec import RunResult, RunSpec
from ondevice_rl.train.services.interrupt import stop_at_boundary
from ondevice_rl.train.services.memory import check_fits
from ondevice_rl.train.services.progress import ProgressBar
from ondevice_rl.train.services.wandb_log import WandbLog

KEEP_CHECKPOINTS = 3
STOP_MESSAGE = "stopping after this segment (again to stop now)"


def train_from_config(
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
    log_every: int | None = None,
    wandb: str | None = None,
) -> RunResult:
    """Trains ``config`` (any registered learner's) from
    ``jax.random.key(seed)``: the same numbers as ``jax.jit(make_train(config))
    (key, hp, env_params)``, in segments.

    Args:
        seed: in ``[0, 2^32)``.
        num_segments: how many segments to cut the run into (default 20,
            then shorter ones if a segment takes over ``SEGMENT_SECONDS``).
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
        log_every: updates per metrics row (default: 1, 2, 5, 10, 20, ...,
            the least that keeps the run within ``DEFAULT_LOG_ROWS`` rows).
        wandb: a Weights & Biases project to log the run's config and rows
            to (needs the ``wandb`` extra).

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
        log_every=log_every,
    )
    check_fits(config)
    out = Path(out_dir) if out_dir is not None else None
    options = Options(progress, on_segment, checkpoint_every, num_segments is None)
    if out is not None:  # what the lock (a file) must come after
        artifacts.check_run_dir(out, force=force)
    with DirLock(out, "{out_dir}") if out is not None else contextlib.nullcontext():
        if out is not None:
            artifacts.prepare_run_dir(out, force=force)
        return _train(spec, out, False, options, WandbLog.opener(wandb))


def resume_training(
    out_dir: str | Path,
    *,
    total_timesteps: int | None = None,
    progress: bool = True,
    on_segment: SegmentCallback | None = None,
    checkpoint_every: int | None = None,
) -> RunResult:
    """Continues the run in ``out_dir`` from its newest checkpoint that
    verifies, with the config, hyperparameters, seed, env params and log
    interval stored there (and into its W&B run, if it logged to one);
    ``total_timesteps`` may extend it (never shorten it).

    Raises:
        RunDirError: one line, before compiling: not a run, a damaged
            ``config.json`` or ``metrics.jsonl``, checkpoints none of which
            verifies (nothing moved then), another process writing there.
        ValueError: one line, before compiling: the run would not fit in
            device memory.
        RunWriteError: as ``train_from_config``.
    """
    check_run_args(checkpoint_every=checkpoint_every)
    out = Path(out_dir)
    spec = RunSpec.stored_in(out)
    if total_timesteps is not None:
        spec = spec.extended(total_timesteps)
    check_fits(spec.config)  # the device may be another than the run's first
    options = Options(progress, on_segment, checkpoint_every, True)
    with DirLock(out, "{resume}"):
        return _train(spec, out, True, options, WandbLog.resumer(out))


def _train(spec, out, resume, options: Options, open_wandb) -> RunResult:
    """Sets up, compiles, loops over the segments, finishes."""
    checkpoints = None
    if out is not None:
        checkpoints = Checkpoints(out / artifacts.CHECKPOINT_DIR, KEEP_CHECKPOINTS)
    with checkpoints or contextlib.nullcontext():
        try:
            run = _setup(spec, out, checkpoints, resume, options.progress, open_wandb)
        except OSError as e:
            raise RunWriteError(
                e.errno, f"cannot write {recovery.where(e, out)}"
            ) from e
        notify = lambda message: run.bar.log(message, True)  # noqa: E731
        with run.bar, stop_at_boundary(notify, STOP_MESSAGE) as stop:
            for line in run.notices:
                notify(line)
            compile_run(run)
            run_segments(run, stop, options)
    return _finish(run)


def _setup(spec, out, checkpoints, resume, progress, open_wandb) -> Run:
    """Plans the segments (from the newest verified checkpoint when
    resuming, newer damaged ones moved aside) and opens the run's files,
    loggers and progress bar; nothing compiled yet."""
    config = spec.config
    done, skipped = recovery.resume_point(spec, checkpoints) if resume else (0, [])
    files = RunFiles(out, spec, done, resumed=resume)
    notices = [recovery.set_aside(checkpoints, skipped, files, done)] if skipped else []
    segments = plan(spec, done)
    files.wandb = open_wandb(spec, files.info, out)
    files.start([s.length for s in segments], done)
    label = f"{config.env} {algorithm_of(config).name}"
    steps = config.num_updates * config.steps_per_update
    bar = ProgressBar(steps, label, enabled=progress)
    rows = RowLog(files.earlier, files.earlier_updates, files.earlier_tail)
    return Run(
        spec, segments, files, checkpoints, bar, done, done, rows, notices=notices
    )


def _finish(run: Run) -> RunResult:
    """Every row (earlier ones too when resumed), the summary in
    ``config.json``, the curve; the result."""
    config, per_update = run.spec.config, run.spec.config.steps_per_update
    metrics, updates = run.rows.metrics(), run.rows.updates()
    this_run = (run.done - run.resumed_from) * per_update
    result = RunResult(
        metrics=metrics,
        final_return=run.rows.final_return(),
        compile_s=run.compile_s,
        run_s=run.run_s,
        sps=this_run / run.run_s if run.run_s > 0 else 0.0,
        env_steps=run.done * per_update,
        out_dir=run.files.out,
        state=run.state,
        interrupted=run.stopped is not None,
        stop_signal=run.stopped,
        nonfinite=run.nonfinite,
        resumed_from=run.resumed_from,
        checkpoint=run.saved,
        config=config,
        updates=updates,
        write_s=run.write_s,
    )
    failed, stopped = run.nonfinite or run.write_error, run.stopped
    status = "failed" if failed else "interrupted" if stopped else "finished"
    if run.write_error is None:
        try:
            run.files.finish(metrics, updates, **summary(result, status))
            return result
        except OSError as e:
            run.write_error = e
    kept = run.saved if run.saved is not None else run.resumed_from
    raise recovery.failure(
        run.write_error, run.files, summary(result, "failed"), run.done, kept
    )
