"""Run one configuration of any registered learner as a few compiled
segments, the state left on the device, nothing lost on the way.

A run reads top to bottom: check the arguments once (``check_new_run`` or
``check_resume``, ``train/run/request.py``: a ``RunRequest``) → ``train``:
lock the directory, plan the segments once (``train/run/plan.py``) →
compile (``train/run/segments.py``) → loop (``train/run/loop.py``): run a
segment, write its rows, checkpoint when due → finish: summary, curve.
``train_from_config``, ``resume_training``, ``ondevice_rl.run_training`` and
``ondevice-rl train`` all take that one path.

Between segments the host fetches the segment's rows (one per ``log_every``
updates, reduced in the program), appends them to ``metrics.jsonl``,
TensorBoard's event files and any W&B run (``train/run/run_files.py``) and
moves the progress bar (without a terminal, prints a progress line). Nothing
calls back to the host inside the compiled code.

* Segment length: when a segment takes more than ``SEGMENT_SECONDS``
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
* Devices (``devices=N``, ``train/run/devices.py``): the environments split
  over N devices, data-parallel; the state stays split between segments
  and is checkpointed and restored as it lies.
"""

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ondevice_rl.files.checkpoint import Checkpoints
from ondevice_rl.train.kit.registry import algorithm_of
from ondevice_rl.train.run import artifacts, recovery
from ondevice_rl.train.run.checks import DEFAULT_SEED
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
from ondevice_rl.train.run.request import RunRequest, check_new_run, check_resume
from ondevice_rl.train.run.result import RunResult
from ondevice_rl.train.run.rows import RowLog
from ondevice_rl.train.run.run_files import RunFiles, summary
from ondevice_rl.train.services.interrupt import stop_at_boundary
from ondevice_rl.train.services.progress import ProgressBar

KEEP_CHECKPOINTS = 3
STOP_MESSAGE = "stopping after this segment (again to stop now)"


def train_from_config(
    config: Any,
    *,
    seed: int = DEFAULT_SEED,
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
    devices: int | str | None = None,
) -> RunResult:
    """Trains ``config`` (any registered learner's) from
    ``jax.random.key(seed)``: the same numbers as ``jax.jit(make_train(config))
    (key, hp, env_params)``, in segments.

    Args:
        seed: in ``[0, 2^32)``.
        num_segments: how many segments to cut the run into (default
            ``DEFAULT_SEGMENTS``, then shorter ones if a segment takes over
            ``SEGMENT_SECONDS``; ``train/run/checks.py``).
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
        eval_episodes: deterministic episodes per evaluation (default
            ``DEFAULT_EVAL_EPISODES``; only with ``eval_every``).
        log_every: updates per metrics row (default: 1, 2, 5, 10, 20, ...,
            the least that keeps the run within ``DEFAULT_LOG_ROWS`` rows).
        wandb: a Weights & Biases project to log the run's config and rows
            to (needs the ``wandb`` extra).
        devices: split the environments over this many devices
            (data-parallel; ``"all"``: every device; learners with an
            ``Algorithm.data_parallel`` trainer only); None: one device.

    Raises:
        ValueError: one line, before compiling: a bad argument
            (``RunArgError``), hyperparameter, env param or output directory
            (``RunDirError``; ``DirInUse`` when another process writes it),
            an env the learner cannot act in, devices it cannot split over,
            or a state that would not fit in device memory.
        KeyError: an unknown env.
        RunWriteError: a write into ``out_dir`` failed and stopped the run.
    """
    request = check_new_run(
        config,
        seed=seed,
        hyperparams=hyperparams,
        env_params=env_params,
        num_segments=num_segments,
        checkpoint_every=checkpoint_every,
        eval_every=eval_every,
        eval_episodes=eval_episodes,
        log_every=log_every,
        devices=devices,
        out_dir=out_dir,
        force=force,
        wandb=wandb,
    )
    return train(request, progress, on_segment)


def resume_training(
    out_dir: str | Path,
    *,
    total_timesteps: int | None = None,
    progress: bool = True,
    on_segment: SegmentCallback | None = None,
    checkpoint_every: int | None = None,
) -> RunResult:
    """Continues the run in ``out_dir`` from its newest checkpoint that
    verifies, with the config, hyperparameters, seed, env params, log
    interval and devices stored there (and into its W&B run, if it logged
    to one); ``total_timesteps`` may extend it (never shorten it).

    Raises:
        RunDirError: one line, before compiling: not a run, a damaged
            ``config.json`` or ``metrics.jsonl``, checkpoints none of which
            verifies (nothing moved then), another process writing there.
        ValueError: one line, before compiling: the run would not fit in
            device memory, or fewer devices than it was split over.
        RunWriteError: as ``train_from_config``.
    """
    request = check_resume(
        out_dir, total_timesteps=total_timesteps, checkpoint_every=checkpoint_every
    )
    return train(request, progress, on_segment)


def train(
    request: RunRequest,
    progress: bool = True,
    on_segment: SegmentCallback | None = None,
) -> RunResult:
    """Runs a checked request: locks its directory (a new run's is emptied
    with ``force``), plans the segments (from the newest verified checkpoint
    when resuming), compiles, loops over the segments, finishes."""
    out = request.out
    options = Options(progress, on_segment, request.checkpoint_every, request.resize)
    with _removed_if_empty(request), _locked(request):
        if out is not None and not request.resume:
            artifacts.prepare_run_dir(out, force=request.force)
        checkpoints = None
        if out is not None:
            checkpoints = Checkpoints(out / artifacts.CHECKPOINT_DIR, KEEP_CHECKPOINTS)
        with checkpoints or contextlib.nullcontext():
            try:
                run = _setup(request, checkpoints, progress)
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


def _locked(request: RunRequest) -> contextlib.AbstractContextManager:
    """The run directory's lock (nothing to lock without one)."""
    if request.out is None:
        return contextlib.nullcontext()
    return DirLock(request.out, "{resume}" if request.resume else "{out_dir}")


@contextlib.contextmanager
def _removed_if_empty(request: RunRequest) -> Iterator[None]:
    """A directory made for the run is removed again if the run wrote
    nothing into it (refused before it started)."""
    try:
        yield
    finally:
        if request.created:
            with contextlib.suppress(OSError):
                out = request.out
                if all(p.name == artifacts.LOCK_FILE for p in out.iterdir()):
                    (out / artifacts.LOCK_FILE).unlink(missing_ok=True)
                    out.rmdir()


def _setup(request: RunRequest, checkpoints, progress: bool) -> Run:
    """Plans the segments (from the newest verified checkpoint when
    resuming, newer damaged ones moved aside) and opens the run's files,
    loggers and progress bar; nothing compiled yet."""
    spec, out, resume = request.spec, request.out, request.resume
    config = spec.config
    done, skipped = recovery.resume_point(spec, checkpoints) if resume else (0, [])
    files = RunFiles(out, spec, done, resumed=resume)
    notices = [recovery.set_aside(checkpoints, skipped, files, done)] if skipped else []
    segments = plan(spec, done)
    files.wandb = request.open_wandb(spec, files.info, out)
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
