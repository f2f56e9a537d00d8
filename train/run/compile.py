"""A run's programs traced once, checked for memory, compiled once.

``ProgramInputs`` names what they are built for. ``traced_programs`` traces
``init`` and a plan's segment programs
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
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.train.run.devices import run_trainer
from ondevice_rl.train.run.run_spec import RunSpec
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


class ProgramInputs(NamedTuple):
    """What a run's programs are built for: ``init`` and one segment per
    ``(length, phase)`` of ``shapes``, logging rows of ``log_every`` updates,
    on one device or data-parallel over ``devices``."""

    config: Any
    key: Any
    hp: Any
    env_params: Any
    shapes: list[tuple[int, int]]
    evaluation: Evaluation | None = None
    log_every: int = 1
    devices: int | None = None

    @classmethod
    def for_run(cls, spec: RunSpec, shapes) -> "ProgramInputs":
        """``spec``'s inputs, for the segments of ``shapes``."""
        evaluation = None
        if spec.eval_every is not None:
            evaluation = Evaluation(spec.eval_every, spec.eval_episodes)
        key = jax.random.key(spec.seed)
        env_params = spec.env_params_tree()
        return cls(
            spec.config, key, spec.hyperparams, env_params, sorted(set(shapes)),
            evaluation, spec.log_every, spec.devices,
        )  # fmt: skip

    def cache_keys(self) -> tuple[tuple, dict[tuple[int, int], tuple]]:
        """The program cache's keys: ``init``'s, and each segment's by its
        ``(length, phase)``."""
        config, devices = self.config, self.devices
        signature = avals((self.key, self.hp, self.env_params))
        segments = {}
        for length, phase in sorted(set(self.shapes)):
            if self.evaluation is None:
                key = ("segment", config, devices, signature, length, self.log_every)
            else:
                key = ("segment-eval", config, devices, signature, length, phase,
                       self.evaluation, self.log_every)  # fmt: skip
            segments[(length, phase)] = key
        return ("init", config, devices, signature), segments


def trace_segment(inputs: ProgramInputs, length: int, phase: int) -> jax.stages.Traced:
    """The traced segment program of ``length`` updates at ``phase``."""
    trainer = run_trainer(inputs.config, inputs.devices)
    key, hp, env_params = inputs.key, inputs.hp, inputs.env_params
    state = jax.eval_shape(trainer.init, key, hp, env_params)
    fn = _segment_fn(trainer, inputs.evaluation, inputs.log_every)
    if inputs.evaluation is None:
        run = jax.jit(fn, static_argnums=(3, 4), donate_argnums=0)
        return run.trace(state, hp, env_params, length, phase)
    run = jax.jit(fn, static_argnums=(5, 6), donate_argnums=0)
    start = jax.ShapeDtypeStruct((), jnp.int32)
    return run.trace(state, hp, env_params, start, eval_key_for(key), length, phase)


def traced_programs(inputs: ProgramInputs) -> list[jax.stages.Traced]:
    """``init`` and the segments, traced (programs already compiled in this
    process are left out); the segments' traces are kept for
    ``compile_programs``."""
    init_key, segment_keys = inputs.cache_keys()
    traced = []
    if init_key not in PROGRAMS:
        trainer = run_trainer(inputs.config, inputs.devices)
        traced.append(
            jax.jit(trainer.init).trace(inputs.key, inputs.hp, inputs.env_params)
        )
    for shape, cache_key in segment_keys.items():
        if cache_key in PROGRAMS:
            continue
        if cache_key not in _TRACED:
            _TRACED[cache_key] = trace_segment(inputs, *shape)
        _TRACED.move_to_end(cache_key)
        traced.append(_TRACED[cache_key])
    while len(_TRACED) > _KEEP:
        _TRACED.popitem(last=False)
    return traced


def compile_programs(inputs: ProgramInputs) -> tuple[Programs, float]:
    """Compiles (or takes from the cache) ``init`` and the segments; returns
    them, bound to the inputs, and the seconds it took."""
    init_key, segment_keys = inputs.cache_keys()
    trainer = run_trainer(inputs.config, inputs.devices)
    key, hp, env_params = inputs.key, inputs.hp, inputs.env_params
    start = time.perf_counter()

    def build_init(options):
        lowered = jax.jit(trainer.init).lower(key, hp, env_params)
        return lowered.compile(compiler_options=options)

    def build_segment(cache_key, shape):
        def build(options):
            traced = _TRACED.pop(cache_key, None)
            if traced is None:
                traced = trace_segment(inputs, *shape)
            return traced.lower().compile(compiler_options=options)

        return build

    init = PROGRAMS.get(init_key, build_init)
    segments = {
        shape: PROGRAMS.get(cache_key, build_segment(cache_key, shape))
        for shape, cache_key in segment_keys.items()
    }
    eval_key = None if inputs.evaluation is None else eval_key_for(key)
    programs = Programs(init, segments, key, hp, env_params, eval_key, inputs.log_every)
    return programs, time.perf_counter() - start
