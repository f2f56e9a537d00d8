"""Run one PPO configuration as a few compiled segments, state left on device.

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

import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl import checkpoint
from ondevice_rl.train import artifacts
from ondevice_rl.train.interrupt import stop_at_boundary
from ondevice_rl.train.ppo import (
    METRIC_NAMES,
    Hyperparams,
    PPOConfig,
    TrainState,
    make_trainer,
)
from ondevice_rl.train.progress import SegmentProgress

DEFAULT_SEGMENTS = 20
#: ``final_return`` is the mean episode return of the last this many updates.
FINAL_WINDOW = 10


class RunResult(NamedTuple):
    """What ``run_training`` returns.

    Attributes:
        metrics: name -> ``[U]`` float32 host array, one value per completed
            update (``U < config.num_updates`` if interrupted).
        final_return: mean ``episode_return`` of the last ``FINAL_WINDOW``
            updates (NaN if none completed).
        compile_s: seconds spent compiling (0 for programs already compiled in
            this process).
        run_s: seconds spent running the segments.
        sps: env steps per second over ``run_s``.
        env_steps: env steps done (``U * config.batch_size``).
        out_dir: where files were written, or None.
        state: the final ``TrainState`` (on device).
        interrupted: whether the run was stopped early by Ctrl-C.
    """

    metrics: dict[str, np.ndarray]
    final_return: float
    compile_s: float
    run_s: float
    sps: float
    env_steps: int
    out_dir: Path | None
    state: TrainState | None
    interrupted: bool = False


def segment_plan(num_updates: int, num_segments: int = DEFAULT_SEGMENTS) -> list[int]:
    """Segment lengths summing to ``num_updates``: ``k`` equal ones then at most
    one shorter remainder, at most ``num_segments`` in all."""
    if num_updates < 1 or num_segments < 1:
        raise ValueError("num_updates and num_segments must be positive")
    length = -(-num_updates // min(num_segments, num_updates))  # ceil
    full, rest = divmod(num_updates, length)
    return [length] * full + ([rest] if rest else [])


class _Programs:
    """A config's compiled ``init`` and ``run`` segments, by segment length."""

    def __init__(self, config: PPOConfig):
        self.trainer = make_trainer(config)
        self.init_fn = jax.jit(self.trainer.init)
        self.run_fn = jax.jit(self.trainer.run, static_argnums=3, donate_argnums=0)
        self.init = None
        self.segments: dict[int, Any] = {}


_CACHE: "OrderedDict[tuple, _Programs]" = OrderedDict()
_CACHE_SIZE = 4


def _avals(tree: Any) -> tuple:
    leaves, treedef = jax.tree.flatten(tree)
    return treedef, tuple((jnp.shape(x), jnp.result_type(x)) for x in leaves)


def _compile(config, key, hp, env_params, lengths) -> tuple[_Programs, float]:
    """Compiles (or reuses) ``init`` and one ``run`` per segment length."""
    cache_key = (config, _avals((key, hp, env_params)))
    programs = _CACHE.pop(cache_key, None) or _Programs(config)
    _CACHE[cache_key] = programs
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    start = time.perf_counter()
    if programs.init is None:
        programs.init = programs.init_fn.lower(key, hp, env_params).compile()
    state = jax.eval_shape(programs.trainer.init, key, hp, env_params)
    for length in sorted(set(lengths) - set(programs.segments)):
        lowered = programs.run_fn.lower(state, hp, env_params, length)
        programs.segments[length] = lowered.compile()
    return programs, time.perf_counter() - start


def _as_hyperparams(config: PPOConfig, hyperparams) -> Hyperparams:
    if hyperparams is None:
        return config.hyperparams
    if isinstance(hyperparams, Mapping):
        unknown = set(hyperparams) - set(Hyperparams._fields)
        if unknown:
            raise ValueError(
                f"unknown hyperparameters {sorted(unknown)}; valid: "
                f"{', '.join(Hyperparams._fields)}"
            )
        return config.replace(**hyperparams).hyperparams
    return Hyperparams(*(jnp.asarray(x, jnp.float32) for x in hyperparams))


def _usable(state) -> bool:
    return state is not None and not any(
        x.is_deleted() for x in jax.tree.leaves(state) if isinstance(x, jax.Array)
    )


def run_training(
    config: PPOConfig,
    *,
    seed: int = 0,
    out_dir: str | Path | None = None,
    num_segments: int | None = None,
    progress: bool = True,
    hyperparams: Hyperparams | Mapping[str, float] | None = None,
    env_params: Any = None,
    on_segment: Callable[[int, int, float], None] | None = None,
) -> RunResult:
    """Trains ``config`` from ``jax.random.key(seed)``; same result as
    ``jax.jit(make_train(config))(key, hp, env_params)`` but in segments.

    Args:
        hyperparams: a ``Hyperparams`` or a mapping overriding some of
            ``config``'s defaults.
        on_segment: called after each segment with ``(updates_done,
            env_steps, latest_episode_return)``; raising KeyboardInterrupt
            there stops the run like Ctrl-C.
        out_dir: if given, receives ``config.json``, ``metrics.jsonl``,
            ``curve.png`` and ``checkpoint/`` (the final ``TrainState``).
    """
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
    bar = SegmentProgress(
        config.num_updates * config.batch_size, config.env, enabled=progress
    )
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
                steps = done * config.batch_size
                bar.update(steps, latest, time.perf_counter() - start)
                if on_segment is not None:
                    on_segment(done, steps, latest)
        except KeyboardInterrupt:
            interrupted = True
        chunks = jax.device_get(chunks)  # waits for a segment still running
        run_s = time.perf_counter() - start
    metrics = {
        k: np.concatenate([np.zeros(0, np.float32)] + [c[k] for c in chunks])
        for k in (chunks[0] if chunks else METRIC_NAMES)
    }
    count = len(metrics["episode_return"])
    env_steps = count * config.batch_size
    tail = metrics["episode_return"][-FINAL_WINDOW:] if count else []
    result = RunResult(
        metrics=metrics,
        final_return=float(np.mean(tail)) if count else float("nan"),
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
    artifacts.write_metrics(
        out / artifacts.METRICS_FILE, result.metrics, config.batch_size
    )
    title = f"{config.env} PPO, seed {seed}"
    artifacts.plot_curve(
        out / artifacts.CURVE_FILE, result.metrics, config.batch_size, title
    )
    if result.state is not None:
        checkpoint.save(out / artifacts.CHECKPOINT_DIR, result.state)
    else:
        print("no usable train state: checkpoint not written", file=sys.stderr)
    artifacts.write_json(
        out / artifacts.CONFIG_FILE,
        artifacts.run_info(config, hp, seed, **info, **summary),
    )
