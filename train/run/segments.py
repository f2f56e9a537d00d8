"""A configuration's compiled pieces for a segmented run.

``init(key, hp, env_params) -> state`` and, per segment ``(n, phase)``,
``segment(state, hp, env_params[, start, eval_key]) -> (state, metrics [n],
params_finite)``: ``n`` updates of the algorithm's ``run``, then whether every
parameter is still finite (the NaN guard's in-program half; metrics carry the
rest). The state is donated from segment to segment. Programs come from the
process's one cache (``train/services/programs.py``), so a second run of the same
config, or a resumed one, compiles nothing.

Periodic evaluation (``Evaluation(every=N, episodes=K)``): the segment runs
its updates in blocks that end where the absolute update count ``start + j``
is a multiple of ``N`` (``phase = start % N``, static; the runner picks
segment lengths that are multiples of ``N``, so ``phase`` is 0 but after a
resume that extends a run) and after each block evaluates the current params
on ``K`` deterministic episodes (``ondevice_rl/evaluation.py``, inside the program:
no host callback). ``metrics["eval_return"]`` ``[n]`` holds their mean return
at those updates and NaN elsewhere. Evaluation keys are
``fold_in(eval_key, update)``: the training stream is untouched and the
numbers do not depend on how the run is cut into segments.
"""

import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.evaluation import evaluate
from ondevice_rl.train.kit.registry import trainer_for
from ondevice_rl.train.kit.state import policy_params
from ondevice_rl.train.services.programs import PROGRAMS, avals

EVAL_METRIC = "eval_return"
#: Folded into a run's key to give its evaluation stream.
EVAL_SALT = 0x5EED_E7A1


class Evaluation(NamedTuple):
    every: int  # N: evaluate after every N-th update (absolute count)
    episodes: int  # K deterministic episodes per evaluation


class Programs(NamedTuple):
    trainer: Any
    init: Any  # compiled init(key, hp, env_params)
    segments: dict[tuple[int, int], Any]  # (length, phase) -> compiled segment


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


def eval_updates(length: int, phase: int, every: int) -> list[int]:
    """0-based indices, within a segment of ``length`` updates starting at an
    update count ``≡ phase (mod every)``, of the updates followed by an
    evaluation."""
    first = every - phase  # updates until the count is a multiple of `every`
    return list(range(first - 1, length, every))


def plan_of_length(num_updates: int, length: int) -> list[int]:
    """``num_updates`` as segments of ``length``, then any remainder."""
    full, rest = divmod(num_updates, length)
    return [length] * full + ([rest] if rest else [])


def eval_segment_length(length: int, eval_every: int, num_updates: int) -> int:
    """``length`` rounded up to a multiple of ``eval_every`` (evaluations then
    land at the same place in every segment: one program), unless no
    evaluation falls within the run."""
    if eval_every > num_updates:
        return length
    return eval_every * -(-length // eval_every)


def schedule(
    done: int, total: int, length: int, every: int | None
) -> list[tuple[int, int]]:
    """``(length, phase)`` of the segments from update ``done`` to ``total``;
    ``phase`` is 0 unless an evaluation falls in a segment off its alignment
    (after a resume that extended a run)."""
    if every is not None:
        length = eval_segment_length(length, every, total)
    plan = []
    for n in plan_of_length(total - done, length) if total > done else []:
        phase = done % every if every is not None else 0
        if every is not None and not eval_updates(n, phase, every):
            phase = 0  # no evaluation in it: the same program as any phase
        plan.append((n, phase))
        done += n
    return plan


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
    ``(length, phase)`` of ``plan``; returns them and the seconds it took."""
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
    return Programs(trainer, init, segments), time.perf_counter() - start


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
