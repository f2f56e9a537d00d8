"""A run's programs traced once, checked for memory, compiled once.

``traced_programs`` traces ``init`` and a plan's segment programs
(``train/run/segments.py``) for a run's inputs: the run's memory check
sizes them (``train/services/memory.py``) before anything is created or
compiled, and keeps the segments' traces here, by their program-cache key,
for ``compile_programs`` to lower instead of tracing them again (``init``'s
trace is JAX's own cache's: the same function, the same inputs).
``compile_programs`` compiles each program, or takes it from the process's
one cache (``train/services/programs.py``), and binds them to the inputs as
``Programs``.
"""

import collections
import time
from typing import Any

import jax
import jax.numpy as jnp

from ondevice_rl.train.run.devices import run_trainer
from ondevice_rl.train.run.segments import (
    Evaluation,
    Programs,
    _segment_fn,
    eval_key_for,
)
from ondevice_rl.train.services.programs import PROGRAMS, avals

#: Segment traces of runs checked but not compiled yet, by program-cache key
#: (a run's own are taken when it compiles; a few more are kept at most).
_TRACED: collections.OrderedDict = collections.OrderedDict()
_KEEP = 8


def trace_segment(
    config: Any,
    key: Any,
    hp: Any,
    env_params: Any,
    length: int,
    phase: int = 0,
    evaluation: Evaluation | None = None,
    log_every: int = 1,
    devices: int | None = None,
) -> jax.stages.Traced:
    """The traced segment program of ``length`` updates at ``phase``."""
    trainer = run_trainer(config, devices)
    state = jax.eval_shape(trainer.init, key, hp, env_params)
    fn = _segment_fn(trainer, evaluation, log_every)
    if evaluation is None:
        run = jax.jit(fn, static_argnums=(3, 4), donate_argnums=0)
        return run.trace(state, hp, env_params, length, phase)
    run = jax.jit(fn, static_argnums=(5, 6), donate_argnums=0)
    start = jax.ShapeDtypeStruct((), jnp.int32)
    return run.trace(state, hp, env_params, start, eval_key_for(key), length, phase)


def lower_segment(*args, **kwargs) -> jax.stages.Lowered:
    """The lowered segment program (for compiling, or reading its text);
    ``trace_segment``'s arguments."""
    return trace_segment(*args, **kwargs).lower()


def _segment_key(config, devices, signature, length, phase, evaluation, log_every):
    if evaluation is None:
        return ("segment", config, devices, signature, length, log_every)
    return (
        "segment-eval",
        config,
        devices,
        signature,
        length,
        phase,
        evaluation,
        log_every,
    )


def traced_programs(
    config: Any,
    key: Any,
    hp: Any,
    env_params: Any,
    plan: list[tuple[int, int]],
    evaluation: Evaluation | None = None,
    log_every: int = 1,
    devices: int | None = None,
) -> list[jax.stages.Traced]:
    """``init`` and one segment per ``(length, phase)`` of ``plan``, traced
    (programs already compiled in this process are left out); the segments'
    traces are kept for ``compile_programs``."""
    signature = avals((key, hp, env_params))
    traced = []
    if ("init", config, devices, signature) not in PROGRAMS:
        trainer = run_trainer(config, devices)
        traced.append(jax.jit(trainer.init).trace(key, hp, env_params))
    for length, phase in sorted(set(plan)):
        shape = (length, phase, evaluation, log_every)
        cache_key = _segment_key(config, devices, signature, *shape)
        if cache_key in PROGRAMS:
            continue
        if cache_key not in _TRACED:
            _TRACED[cache_key] = trace_segment(
                config, key, hp, env_params, *shape, devices
            )
        _TRACED.move_to_end(cache_key)
        traced.append(_TRACED[cache_key])
    while len(_TRACED) > _KEEP:
        _TRACED.popitem(last=False)
    return traced


def compile_programs(
    config: Any,
    key: Any,
    hp: Any,
    env_params: Any,
    plan: list[tuple[int, int]],
    evaluation: Evaluation | None = None,
    log_every: int = 1,
    devices: int | None = None,
) -> tuple[Programs, float]:
    """Compiles (or takes from the cache) ``init`` and one segment per
    ``(length, phase)`` of ``plan``, logging rows of ``log_every`` updates,
    on one device or data-parallel over ``devices``; returns them, bound to
    these inputs, and the seconds it took."""
    signature = avals((key, hp, env_params))
    trainer = run_trainer(config, devices)
    start = time.perf_counter()

    def build_init(options):
        lowered = jax.jit(trainer.init).lower(key, hp, env_params)
        return lowered.compile(compiler_options=options)

    init = PROGRAMS.get(("init", config, devices, signature), build_init)

    def build_segment(cache_key, length, phase):
        def build(options):
            traced = _TRACED.pop(cache_key, None)
            if traced is None:
                shape = (length, phase, evaluation, log_every, devices)
                traced = trace_segment(config, key, hp, env_params, *shape)
            return traced.lower().compile(compiler_options=options)

        return build

    segments = {}
    for n, p in sorted(set(plan)):
        cache_key = _segment_key(
            config, devices, signature, n, p, evaluation, log_every
        )
        segments[(n, p)] = PROGRAMS.get(cache_key, build_segment(cache_key, n, p))
    eval_key = None if evaluation is None else eval_key_for(key)
    programs = Programs(init, segments, key, hp, env_params, eval_key, log_every)
    return programs, time.perf_counter() - start
