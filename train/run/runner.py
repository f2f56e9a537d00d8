"""Run one configuration of any registered learner as a few compiled
segments, the state left on the device, nothing lost on the way.

The ``U = config.num_updates`` updates run as segments of ``L`` updates
(``segment_plan``: equal ones plus at most one shorter remainder, so at most
two programs are compiled). Between segments the host fetches the segment's
metrics (a few floats per update), appends them to ``metrics.jsonl``, moves
the progress bar and, when due, writes an orbax checkpoint of the whole
train state (params, optimiser state, env states, PRNG keys, any replay
buffer, the update counter). Nothing calls back to the host inside the
compiled code.

* Checkpoints: every ``checkpoint_every`` updates, or by default at the first
  segment boundary at least ``CHECKPOINT_SECONDS`` after the previous one;
  always at the end and when stopped. The last 3 are kept.
* Stops: a first Ctrl-C or SIGTERM finishes the running segment, then
  checkpoints and writes everything; a second one exits at once (the last
  checkpoint stays). ``resume_training`` continues from the latest
  checkpoint; on CPU the result equals the uninterrupted run's exactly.
* NaN guard: every segment also returns whether all parameters are still
  finite; with the per-update losses this names the first bad update and
  metric. The run then stops without checkpointing the bad state.
* Periodic evaluation (``eval_every=N``): inside the segment programs, after
  every N-th update, ``eval_episodes`` deterministic episodes of the current
  policy (``train/run/segments.py``); their mean return is the metric
  ``eval_return`` (NaN, written null, at other updates; the NaN guard skips
  it). Segment lengths are made multiples of N so that one program serves.
* TensorBoard: every metric is also written as a scalar against env steps to
  event files in ``out_dir`` as segments finish (``train/services/tensorboard.py``).
"""

import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jax
import numpy as np

from ondevice_rl import envs
from ondevice_rl.checkpoint import Checkpoints
from ondevice_rl.metrics import final_return
from ondevice_rl.train.kit.config import hyperparams_from
from ondevice_rl.train.kit.registry import algorithm_of
from ondevice_rl.train.run import artifacts
from ondevice_rl.train.run.run_files import RunFiles
from ondevice_rl.train.run.run_spec import (
    DEFAULT_EVAL_EPISODES,
    RunResult,
    RunSpec,
    env_params_dict,
)
from ondevice_rl.train.run.segments import (
    EVAL_METRIC,
    Evaluation,
    compile_programs,
    eval_key_for,
    eval_segment_length,
    first_nonfinite,
    plan_of_length,
    schedule,
)
from ondevice_rl.train.services.interrupt import stop_at_boundary, wait_ready
from ondevice_rl.train.services.memory import check_fits
from ondevice_rl.train.services.progress import ProgressBar

DEFAULT_SEGMENTS = 20
#: Default checkpoint spacing, in seconds of training (at segment boundaries).
CHECKPOINT_SECONDS = 120.0
KEEP_CHECKPOINTS = 3


def segment_plan(num_updates: int, num_segments: int = DEFAULT_SEGMENTS) -> list[int]:
    """Segment lengths summing to ``num_updates``: ``k`` equal ones then at most
    one shorter remainder, at most ``num_segments`` in all."""
    if num_updates < 1 or num_segments < 1:
        raise ValueError("num_updates and num_segments must be positive")
    length = -(-num_updates // min(num_segments, num_updates))  # ceil
    return plan_of_length(num_updates, length)


def _as_hyperparams(config, hyperparams) -> Any:
    fields = config.HYPERPARAMS._fields
    if hyperparams is None:
        return config.hyperparams
    if isinstance(hyperparams, Mapping):
        unknown = set(hyperparams) - set(fields)
        if unknown:
            raise ValueError(
                f"unknown hyperparameters {sorted(unknown)}; valid: {', '.join(fields)}"
            )
        return config.replace(**hyperparams).hyperparams
    return hyperparams_from(config.HYPERPARAMS, hyperparams)


def run_training(
    config: Any,
    *,
    seed: int = 0,
    out_dir: str | Path | None = None,
    num_segments: int | None = None,
    progress: bool = True,
    hyperparams: Any = None,
    env_params: Any = None,
    on_segment: Callable[[int, int, float], None] | None = None,
    checkpoint_every: int | None = None,
    force: bool = False,
    eval_every: int | None = None,
    eval_episodes: int = DEFAULT_EVAL_EPISODES,
) -> RunResult:
    """Trains ``config`` (any registered learner's) from
    ``jax.random.key(seed)``: the same numbers as ``jax.jit(make_train(config))
    (key, hp, env_params)``, in segments.

    Args:
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
        eval_episodes: deterministic episodes per evaluation.

    Raises:
        ValueError: bad seed, hyperparameters or output directory, or a
            state that would not fit in device memory (before compiling).
    """
    if not 0 <= seed < 2**32:
        raise ValueError(f"seed must be in [0, 2^32), got {seed}")
    if checkpoint_every is not None and checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be >= 1, got {checkpoint_every}")
    for name, value in (("eval_every", eval_every), ("eval_episodes", eval_episodes)):
        if value is not None and not 1 <= value < 2**31:
            raise ValueError(f"{name} must be in [1, 2^31), got {value}")
    hp = _as_hyperparams(config, hyperparams)
    if env_params is not None:
        env, _ = envs.make(config.env)
        env_params = env.check_params(env_params_dict(env_params))
    plan = segment_plan(config.num_updates, num_segments or DEFAULT_SEGMENTS)
    length = plan[0]
    if eval_every is not None:
        length = eval_segment_length(length, eval_every, config.num_updates)
    spec = RunSpec(config, hp, seed, env_params, length, eval_every, int(eval_episodes))
    check_fits(config)
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        artifacts.prepare_run_dir(out, force=force)
        (out / artifacts.METRICS_FILE).write_text("")
    return _train(spec, out, 0, progress, on_segment, checkpoint_every)


def resume_training(
    out_dir: str | Path,
    *,
    total_timesteps: int | None = None,
    progress: bool = True,
    on_segment: Callable[[int, int, float], None] | None = None,
    checkpoint_every: int | None = None,
) -> RunResult:
    """Continues the run in ``out_dir`` from its latest checkpoint with the
    config, hyperparameters, seed and env params stored there;
    ``total_timesteps`` may extend it (never shorten it)."""
    out = Path(out_dir)
    artifacts.prepare_run_dir(out, resume=True)
    spec = RunSpec.load(out / artifacts.CONFIG_FILE)
    if total_timesteps is not None:
        spec = spec.extended(total_timesteps)
    with Checkpoints(out / artifacts.CHECKPOINT_DIR) as checkpoints:
        done = checkpoints.latest() or 0
    artifacts.truncate_metrics(out / artifacts.METRICS_FILE, done)
    return _train(spec, out, done, progress, on_segment, checkpoint_every)


def _train(spec, out, done, progress, on_segment, checkpoint_every) -> RunResult:
    config, hp, seed = spec.config, spec.hyperparams, spec.seed
    resumed_from = done
    env_params = spec.env_params_tree()
    total = config.num_updates
    per_update = config.steps_per_update
    every = spec.eval_every
    plan = schedule(done, total, spec.segment_length, every)
    evaluation = None if every is None else Evaluation(every, spec.eval_episodes)
    key = jax.random.key(seed)
    eval_key = eval_key_for(key)
    label = f"{config.env} {algorithm_of(config).name}"
    bar = ProgressBar(total * per_update, label, enabled=progress)
    checkpoints = (
        Checkpoints(out / artifacts.CHECKPOINT_DIR, KEEP_CHECKPOINTS) if out else None
    )
    segments = [n for n, _ in schedule(0, total, spec.segment_length, every)]
    files = RunFiles(out, spec, segments, done)
    earlier = files.earlier_metrics(done)
    files.status(status="running", updates=done)
    chunks, state, stopped, nonfinite, saved = [], None, None, None, None
    message = "stopping after this segment (again to stop now)"
    with bar, stop_at_boundary(lambda m: bar.log(m, True), message) as stop:
        bar.log(f"compiling {len(set(plan)) or 0} segment program(s)...")
        programs, compile_s = compile_programs(
            config, key, hp, env_params, plan or [(1, 0)], evaluation
        )
        bar.log(f"compiled in {compile_s:.1f} s")
        start = last_save = time.perf_counter()
        state = programs.init(key, hp, env_params)
        if done:
            state = checkpoints.restore(done, state)
            bar.log(f"resumed from update {done}")
        bar.update(done * per_update, float("nan"), 0.0)
        try:
            for length, phase in plan:
                if stop():
                    break
                extra = () if evaluation is None else (np.int32(done), eval_key)
                program = programs.segments[(length, phase)]
                state, seg, params_ok = program(state, hp, env_params, *extra)
                seg, params_ok = jax.device_get(wait_ready((seg, params_ok)))
                nonfinite = first_nonfinite(seg, bool(params_ok), done)
                chunks.append(seg)
                files.append(seg, done)
                for i in np.flatnonzero(np.isfinite(seg.get(EVAL_METRIC, []))):
                    value = seg[EVAL_METRIC][i]
                    bar.log(f"update {done + i + 1}: eval return {value:.2f}")
                done += length
                if nonfinite:
                    bar.log(f"stopping: {nonfinite}", True)
                    break
                latest = float(seg["episode_return"][-1])
                bar.update(done * per_update, latest, time.perf_counter() - start)
                due = (
                    done // checkpoint_every > (done - length) // checkpoint_every
                    if checkpoint_every
                    else time.perf_counter() - last_save >= CHECKPOINT_SECONDS
                )
                if checkpoints is not None and (due or done == total or stop()):
                    checkpoints.save(done, state)
                    saved, last_save = done, time.perf_counter()
                if on_segment is not None:
                    on_segment(done, done * per_update, latest)
        except KeyboardInterrupt:
            stop.signal = stop.signal or signal.SIGINT
        stopped = stop.signal
        if checkpoints is not None and chunks and not nonfinite and saved != done:
            checkpoints.save(done, state)  # stopped from on_segment
            saved = done
        run_s = time.perf_counter() - start
    if checkpoints is not None:
        checkpoints.__exit__()
    names = chunks[0] if chunks else earlier
    metrics = {
        k: np.concatenate(
            [earlier.get(k, np.zeros(0, np.float32))] + [c[k] for c in chunks]
        )
        for k in names
    }
    this_run = sum(len(c["episode_return"]) for c in chunks) * per_update
    returns = metrics.get("episode_return", np.zeros(0, np.float32))
    result = RunResult(
        metrics=metrics,
        final_return=final_return(returns),
        compile_s=compile_s,
        run_s=run_s,
        sps=this_run / run_s if run_s > 0 else 0.0,
        env_steps=len(returns) * per_update,
        out_dir=out,
        state=state,
        interrupted=stopped is not None,
        stop_signal=stopped,
        nonfinite=nonfinite,
        resumed_from=resumed_from,
        checkpoint=saved,
        config=config,
    )
    status = "failed" if nonfinite else "interrupted" if stopped else "finished"
    files.finish(
        metrics,
        status=status,
        updates=len(returns),
        env_steps=result.env_steps,
        compile_s=compile_s,
        run_s=run_s,
        sps=result.sps,
        final_return=result.final_return,
        checkpoint=saved,
        nonfinite=nonfinite,
    )
    return result
