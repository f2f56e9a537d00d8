"""A run's compiled programs, bound to its inputs.

``compile_programs`` gives ``Programs``: ``init(key, hp, env_params) ->
state`` and, per segment shape ``(n, phase)`` (``train/run/plan.py``),
``segment(state, hp, env_params[, start, eval_key]) -> (state, metrics [n],
params_finite)``: ``n`` updates of the learner's ``run``, then whether every
parameter is still finite (the NaN guard's in-program half; metrics carry
the rest). ``Programs.run(state, segment)`` runs one segment and hands back
its metrics on the host with the NaN guard's verdict. The state is donated
from segment to segment. Programs come from the process's one cache
(``train/services/programs.py``), so a second run of the same config, or a
resumed one, compiles nothing.

Periodic evaluation (``Evaluation(every=N, episodes=K)``): the segment runs
its updates in blocks that end where the absolute update count ``start + j``
is a multiple of ``N`` (``phase = start % N``, static) and after each block
evaluates the current params on ``K`` deterministic episodes
(``ondevice_rl/evaluation.py``, inside the program: no host callback).
``metrics["eval_return"]`` ``[n]`` holds their mean return at those updates
and NaN elsewhere. Evaluation keys are ``fold_in(eval_key, update)``: the
training stream is untouched and the numbers do not depend on how the run is
cut into segments.
"""

import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.evaluation import evaluate
from ondevice_rl.train.kit.registry import trainer_for
from ondevice_rl.train.kit.state import policy_params
from ondevice_rl.train.run.plan import Segment, eval_updates
from ondevice_rl.train.services.interrupt import wait_ready
from ondevice_rl.train.services.programs import PROGRAMS, avals

EVAL_METRIC = "eval_return"
#: Folded into a run's key to give its evaluation stream.
EVAL_SALT = 0x5EED_E7A1


class Evaluation(NamedTuple):
    every: int  # N: evaluate after every N-th update (absolute count)
    episodes: int  # K deterministic episodes per evaluation


class Programs(NamedTuple):
    init: Any  # compiled init(key, hp, env_params)
    segments: dict[tuple[int, int], Any]  # (length, phase) -> compiled segment
    key: Any  # the inputs they were compiled for
    hp: Any
    env_params: Any
    eval_key: Any  # None without periodic evaluation

    def initial_state(self) -> Any:
        """The train state before the first update."""
        return self.init(self.key, self.hp, self.env_params)

    def run(self, state: Any, segment: Segment) -> tuple[Any, dict, str | None]:
        """Runs ``segment`` from ``state``: ``(state, metrics, nonfinite)``,
        the metrics ``[n]`` on the host once ready (waiting in short sleeps,
        so a second Ctrl-C acts at once), ``nonfinite`` the NaN guard's
        finding (``first_nonfinite``) or None."""
        program = self.segments[segment.program]
        extra = ()
        if self.eval_key is not None:
            extra = (np.int32(segment.start), self.eval_key)
        state, metrics, params_ok = program(state, self.hp, self.env_params, *extra)
        metrics, params_ok = jax.device_get(wait_ready((metrics, params_ok)))
        return state, metrics, first_nonfinite(metrics, bool(params_ok), segment.start)


def eval_key_for(key: jax.Array) -> jax.Array:
    """The evaluation stream of a run whose key is ``key``."""
    return jax.random.fold_in(key, EVAL_SALT)


def all_finite(tree: Any) -> jax.Array:
    """``[]`` bool: every float leaf of ``tree`` is finite."""
    leaves = [
        jnp.all(jnp.isfinite(x))
        for x in jax.tree.leaves(tree)
        if jnp.issubdtype(x.dtype, jnp.floating)
    ]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.bool_(True)


def _segment_fn(trainer: Any, evaluation: Evaluation | None):
    """``segment(state, hp, env_params, [start, eval_key,] length, phase)``."""
    if evaluation is None:

        def segment(state, hp, env_params, length, phase):
            state, metrics = trainer.run(state, hp, env_params, length)
            return state, metrics, all_finite(state.params)

        return segment

    every, episodes = evaluation

    def evaluate_at(state, env_params, eval_key, update):
        env_params = trainer.default_env_params if env_params is None else env_params
        key = jax.random.fold_in(eval_key, update)
        params = policy_params(state)
        carry = trainer.initial_carry((episodes,))
        result = evaluate(
            trainer.policy, params, trainer.env, env_params, key, episodes, True, carry
        )
        return jnp.mean(result["return"])

    def segment(state, hp, env_params, start, eval_key, length, phase):
        positions = eval_updates(length, phase, every)
        if not positions:  # the next evaluation lies beyond this segment
            head = length
        else:  # up to the first evaluation when not aligned, then blocks
            head = positions[0] + 1 if phase else 0
        blocks = (length - head) // every
        tail = length - head - blocks * every
        pieces, evals = [], []
        if head:
            state, m = trainer.run(state, hp, env_params, head)
            pieces.append(m)
            if positions:
                evals.append(
                    evaluate_at(state, env_params, eval_key, start + head)[None]
                )
        if blocks:

            def block(state, b):
                state, m = trainer.run(state, hp, env_params, every)
                update = start + head + (b + 1) * every
                return state, (
                    m,
                    evaluate_at(state, env_params, eval_key, update),
                )

            state, (m, e) = jax.lax.scan(block, state, jnp.arange(blocks))
            pieces.append(jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), m))
            evals.append(e)
        if tail:
            state, m = trainer.run(state, hp, env_params, tail)
            pieces.append(m)
        metrics = jax.tree.map(lambda *xs: jnp.concatenate(xs), *pieces)
        values = jnp.concatenate(evals) if evals else jnp.zeros((0,), jnp.float32)
        curve = jnp.full((length,), jnp.nan, jnp.float32)
        metrics[EVAL_METRIC] = curve.at[jnp.asarray(positions, jnp.int32)].set(values)
        return state, metrics, all_finite(state.params)

    return segment


def lower_segment(
    config: Any,
    key: Any,
    hp: Any,
    env_params: Any,
    length: int,
    phase: int = 0,
    evaluation: Evaluation | None = None,
) -> jax.stages.Lowered:
    """The lowered segment program (for compiling, or reading its text)."""
    trainer = trainer_for(config)
    state = jax.eval_shape(trainer.init, key, hp, env_params)
    fn = _segment_fn(trainer, evaluation)
    if evaluation is None:
        run = jax.jit(fn, static_argnums=(3, 4), donate_argnums=0)
        return run.lower(state, hp, env_params, length, phase)
    run = jax.jit(fn, static_argnums=(5, 6), donate_argnums=0)
    start = jax.ShapeDtypeStruct((), jnp.int32)
    return run.lower(state, hp, env_params, start, eval_key_for(key), length, phase)


def compile_programs(
    config: Any,
    key: Any,
    hp: Any,
    env_params: Any,
    plan: list[tuple[int, int]],
    evaluation: Evaluation | None = None,
) -> tuple[Programs, float]:
    """Compiles (or takes from the cache) ``init`` and one segment per
    ``(length, phase)`` of ``plan``; returns them, bound to these inputs, and
    the seconds it took."""
    signature = avals((key, hp, env_params))
    trainer = trainer_for(config)
    start = time.perf_counter()

    def build_init(options):
        lowered = jax.jit(trainer.init).lower(key, hp, env_params)
        return lowered.compile(compiler_options=options)

    init = PROGRAMS.get(("init", config, signature), build_init)

    def build_segment(length, phase):
        def build(options):
            lowered = lower_segment(
                config, key, hp, env_params, length, phase, evaluation
            )
            return lowered.compile(compiler_options=options)

        return build

    def cache_key(length, phase):
        if evaluation is None:
            return ("segment", config, signature, length)
        return ("segment-eval", config, signature, length, phase, evaluation)

    segments = {
        (n, p): PROGRAMS.get(cache_key(n, p), build_segment(n, p))
        for n, p in sorted(set(plan))
    }
    eval_key = None if evaluation is None else eval_key_for(key)
    programs = Programs(init, segments, key, hp, env_params, eval_key)
    return programs, time.perf_counter() - start


def first_nonfinite(metrics: dict, params_ok: bool, done: int) -> str | None:
    """The NaN guard's host half: the first non-finite metric of a segment's
    ``[n]`` metrics (updates ``done + 1 ...``), else non-finite parameters,
    as one line; None if all is finite."""
    # eval_return is NaN between evaluations by design (params_ok covers it).
    metrics = {k: v for k, v in metrics.items() if k != EVAL_METRIC}
    bad = {k: np.flatnonzero(~np.isfinite(v)) for k, v in metrics.items()}
    bad = {k: int(v[0]) for k, v in bad.items() if len(v)}
    if bad:
        name = min(bad, key=lambda k: (bad[k], k))
        return f"non-finite {name} at update {done + bad[name] + 1}"
    if not params_ok:
        count = len(next(iter(metrics.values())))
        return f"non-finite parameters after update {done + count}"
    return None
