"""Run one configuration of any registered algorithm as a few compiled
segments, state left on device.

The ``U = config.num_updates`` updates are split into at most ``num_segments``
calls of one compiled ``trainer.run`` (scan of ``n`` updates): equal segments
plus at most one shorter remainder, so at most two programs (plus the small
``init``) are compiled. The ``TrainState`` is donated from segment to segment
and never leaves the device; between segments only the latest episode return
is fetched, for the progress bar. Nothing calls back to the host inside the
compiled code.

Ctrl-C stops after the running segment (Ctrl-C again aborts at once); what has
been collected is returned and written all the same.
"""

import functools
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from ondevice_rl import checkpoint
from ondevice_rl.metrics import EPISODE_METRICS, final_return
from ondevice_rl.train import artifacts
from ondevice_rl.train.algorithm import hyperparams_from
from ondevice_rl.train.interrupt import stop_at_boundary
from ondevice_rl.train.programs import PROGRAMS, avals
from ondevice_rl.train.progress import ProgressBar
from ondevice_rl.train.registry import algorithm_of

DEFAULT_SEGMENTS = 20


class RunResult(NamedTuple):
    """What ``run_training`` returns.

    Attributes:
        metrics: name -> ``[U]`` float32 host array, one value per completed
            update (``U < config.num_updates`` if interrupted).
        final_return: ``ondevice_rl.metrics.final_return`` of the
            ``episode_return`` curve (NaN if no update completed).
        compile_s: seconds spent compiling (0 for programs already compiled in
            this process).
        run_s: seconds spent running the segments.
        sps: env steps per second over ``run_s``.
        env_steps: env steps done (``U * config.steps_per_update``).
        out_dir: where files were written, or None.
        state: the final train state (on device).
        interrupted: whether the run was stopped early by Ctrl-C.
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


def segment_plan(num_updates: int, num_segments: int = DEFAULT_SEGMENTS) -> list[int]:
    """Segment lengths summing to ``num_updates``: ``k`` equal ones then at most
    one shorter remainder, at most ``num_segments`` in all."""
    if num_updates < 1 or num_segments < 1:
        raise ValueError("num_updates and num_segments must be positive")
    length = -(-num_updates // min(num_segments, num_updates))  # ceil
    full, rest = divmod(num_updates, length)
    return [length] * full + ([rest] if rest else [])


class _Programs(NamedTuple):
    trainer: Any
    init: Any  # compiled init(key, hp, env_params)
    segments: dict[int, Any]  # length -> compiled run(state, hp, env_params)


@functools.lru_cache(maxsize=8)
def _trainer(config) -> Any:
    return algorithm_of(config).make_trainer(config)


def _compile(config, key, hp, env_params, lengths) -> tuple[_Programs, float]:
    """Compiles (or takes from ``PROGRAMS``) ``init`` and one ``run`` per
    segment length."""
    signature = avals((key, hp, env_params))
    trainer = _trainer(config)
    start = time.perf_counter()

    def build_init(options):
        lowered = jax.jit(trainer.init).lower(key, hp, env_params)
        return lowered.compile(compiler_options=options)

    init = PROGRAMS.get(("init", config, signature), build_init)
    state = jax.eval_shape(trainer.init, key, hp, env_params)
    run = jax.jit(trainer.run, static_argnums=3, donate_argnums=0)

    def build_run(length):
        def build(options):
            lowered = run.lower(state, hp, env_params, length)
            return lowered.compile(compiler_options=options)

        return build

    segments = {
        n: PROGRAMS.get(("run", config, signature, n), build_run(n))
        for n in sorted(set(lengths))
    }
    return _Programs(trainer, init, segments), time.perf_counter() - start


def _as_hyperparams(config, hyperparams) -> Any:
    fields = config.HYPERPARAMS._fields
    if hyperparams is None:
        return config.hyperparams
    if isinstance(hyperparams, Mapping):
        unknown = set(hyperparams) - set(fields)
        if unknown:
            raise ValueError(
                f"unknown hyperparameters {sorted(unknown)}; valid: "
                f"{', '.join(fields)}"
            )
        return config.replace(**hyperparams).hyperparams
    return hyperparams_from(config.HYPERPARAMS, hyperparams)


def _usable(state) -> bool:
    return state is not None and not any(
        x.is_deleted() for x in jax.tree.leaves(state) if isinstance(x, jax.Array)
    )


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
) -> RunResult:
    """Trains ``config`` (any registered algorithm's) from
    ``jax.random.key(seed)``; same result as ``jax.jit(make_train(config))(key,
    hp, env_params)`` but in segments.

    Args:
        hyperparams: the algorithm's ``Hyperparams`` or a mapping overriding
            some of ``config``'s defaults.
        on_segment: called after each segment with ``(updates_done,
            env_steps, latest_episode_return)``; raising KeyboardInterrupt
            there stops the run like Ctrl-C.
        out_dir: if given, receives ``config.json``, ``metrics.jsonl``,
            ``curve.png`` and ``checkpoint/`` (the final train state).
    """
    if not 0 <= seed < 2**32:
        raise ValueError(f"seed must be in [0, 2^32), got {seed}")
    hp = _as_hyperparams(config, hyperparams)
    plan = segment_plan(config.num_updates, num_segments or DEFAULT_SEGMENTS)
    out = Path(out_dir) if out_dir is not None else None
    info = {"segments": plan}
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        artifacts.write_json(
            out / artifacts.CONFIG_FILE,
            artifacts.run_info(config, hp, seed, **info, status="running"),
        )
    key = jax.random.key(seed)
    per_update = config.steps_per_update
    label = f"{config.env} {algorithm_of(config).name}"
    bar = ProgressBar(config.num_updates * per_update, label, enabled=progress)
    chunks, state, interrupted = [], None, False
    stop_message = "stopping after this segment (Ctrl-C again to abort)"
    with bar, stop_at_boundary(lambda m: bar.log(m, True), stop_message) as stop:
        bar.log(f"compiling {len(set(plan))} segment program(s)...")
        programs, compile_s = _compile(config, key, hp, env_params, plan)
        bar.log(f"compiled in {compile_s:.1f} s")
        start = time.perf_counter()
        try:
            state = programs.init(key, hp, env_params)
            done = 0
            for length in plan:
                if stop():
                    raise KeyboardInterrupt
                state, seg = programs.segments[length](state, hp, env_params)
                chunks.append(seg)
                latest = float(seg["episode_return"][-1])  # waits for the segment
                done += length
                steps = done * per_update
                bar.update(steps, latest, time.perf_counter() - start)
                if on_segment is not None:
                    on_segment(done, steps, latest)
        except KeyboardInterrupt:
            interrupted = True
        chunks = jax.device_get(chunks)  # waits for a segment still running
        run_s = time.perf_counter() - start
    metrics = {
        k: np.concatenate([np.zeros(0, np.float32)] + [c[k] for c in chunks])
        for k in (chunks[0] if chunks else EPISODE_METRICS)
    }
    env_steps = len(metrics["episode_return"]) * per_update
    result = RunResult(
        metrics=metrics,
        final_return=final_return(metrics["episode_return"]),
        compile_s=compile_s,
        run_s=run_s,
        sps=env_steps / run_s if run_s > 0 else 0.0,
        env_steps=env_steps,
        out_dir=out,
        state=state if _usable(state) else None,
        interrupted=interrupted,
    )
    if out is not None:
        _write(out, config, hp, seed, info, result)
    return result


def _write(out: Path, config, hp, seed: int, info: dict, result: RunResult) -> None:
    summary = {
        "status": "interrupted" if result.interrupted else "finished",
        "updates": len(result.metrics["episode_return"]),
        **{k: getattr(result, k) for k in ("env_steps", "compile_s", "run_s", "sps")},
        "final_return": artifacts.finite_or_none(result.final_return),
    }
    per_update = config.steps_per_update
    artifacts.write_metrics(out / artifacts.METRICS_FILE, result.metrics, per_update)
    title = f"{config.env} {algorithm_of(config).name.upper()}, seed {seed}"
    artifacts.plot_curve(out / artifacts.CURVE_FILE, result.metrics, per_update, title)
    if result.state is not None:
        checkpoint.save(out / artifacts.CHECKPOINT_DIR, result.state)
    else:
        print("no usable train state: checkpoint not written", file=sys.stderr)
    artifacts.write_json(
        out / artifacts.CONFIG_FILE,
        artifacts.run_info(config, hp, seed, **info, **summary),
    )
