"""A configuration's compiled pieces for a segmented run.

``init(key, hp, env_params) -> state`` and, per segment length ``n``,
``segment(state, hp, env_params) -> (state, metrics [n], params_finite)``:
``n`` updates of the algorithm's ``run``, then whether every parameter is
still finite (the NaN guard's in-program half; metrics carry the rest). The
state is donated from segment to segment. Programs come from the process's
one cache (``train/programs.py``), so a second run of the same config, or a
resumed one, compiles nothing.
"""

import functools
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.train.programs import PROGRAMS, avals
from ondevice_rl.train.registry import algorithm_of


class Programs(NamedTuple):
    trainer: Any
    init: Any  # compiled init(key, hp, env_params)
    segments: dict[int, Any]  # length -> compiled segment(state, hp, env_params)


@functools.lru_cache(maxsize=8)
def trainer_for(config: Any) -> Any:
    return algorithm_of(config).make_trainer(config)


def all_finite(tree: Any) -> jax.Array:
    """``[]`` bool: every float leaf of ``tree`` is finite."""
    leaves = [
        jnp.all(jnp.isfinite(x))
        for x in jax.tree.leaves(tree)
        if jnp.issubdtype(x.dtype, jnp.floating)
    ]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.bool_(True)


def compile_programs(
    config: Any, key: Any, hp: Any, env_params: Any, lengths: list[int]
) -> tuple[Programs, float]:
    """Compiles (or takes from the cache) ``init`` and one segment per length;
    returns them and the seconds it took."""
    signature = avals((key, hp, env_params))
    trainer = trainer_for(config)
    start = time.perf_counter()

    def build_init(options):
        lowered = jax.jit(trainer.init).lower(key, hp, env_params)
        return lowered.compile(compiler_options=options)

    init = PROGRAMS.get(("init", config, signature), build_init)
    state = jax.eval_shape(trainer.init, key, hp, env_params)

    def segment(state, hp, env_params, length):
        state, metrics = trainer.run(state, hp, env_params, length)
        return state, metrics, all_finite(state.params)

    run = jax.jit(segment, static_argnums=3, donate_argnums=0)

    def build_segment(length):
        def build(options):
            lowered = run.lower(state, hp, env_params, length)
            return lowered.compile(compiler_options=options)

        return build

    segments = {
        n: PROGRAMS.get(("segment", config, signature, n), build_segment(n))
        for n in sorted(set(lengths))
    }
    return Programs(trainer, init, segments), time.perf_counter() - start
