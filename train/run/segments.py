"""A run's programs, bound to its inputs.

``compile_programs`` gives ``Programs``: ``init(key, hp, env_params) ->
state`` and, per segment shape ``(n, phase)`` (``train/run/plan.py``),
``segment(state, hp, env_params[, start, eval_key]) -> (state, Logged)``
(traced and compiled once by ``train/run/compile.py``):
``n`` updates of the learner's ``run``, then, still inside the program, the
per-update metrics reduced to one row per ``log_every`` updates
(``ondevice_rl.metrics.log_rows``), the last ``FINAL_WINDOW`` per-update
``episode_return`` values (the final return is computed from full-resolution
values, not rows) and the NaN guard's in-program half: where each metric is
first non-finite, and whether every parameter still is. Only that crosses
to the host. ``Programs.run(state, segment)`` runs one segment and hands back
its rows, the row updates, the tail and the NaN guard's verdict. The state is
donated from segment to segment. Programs come from the process's one cache
(``train/services/programs.py``), so a second run of the same config, or a
resumed one, compiles nothing. A data-parallel run (``devices``) compiles
its learner's data-parallel trainer (``train/run/devices.py``) the same way;
its state stays split over the devices from segment to segment.

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

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.evaluation import evaluate
from ondevice_rl.metrics import FINAL_WINDOW, log_rows, row_updates
from ondevice_rl.train.kit.state import policy_params
from ondevice_rl.train.run.plan import Segment, eval_updates
from ondevice_rl.train.services.interrupt import wait_ready

EVAL_METRIC = "eval_return"
#: Folded into a run's key to give its evaluation stream.
EVAL_SALT = 0x5EED_E7A1


class Evaluation(NamedTuple):
    every: int  # N: evaluate after every N-th update (absolute count)
    episodes: int  # K deterministic episodes per evaluation


class Logged(NamedTuple):
    """What a segment of ``n`` updates sends to the host."""

    rows: dict[str, Any]  # name -> [R] rows of log_every updates (log_rows)
    tail: Any  # [min(n, FINAL_WINDOW)] the last updates' episode_return
    first_bad: dict[str, Any]  # name -> [] int32: first non-finite update, or n
    params_finite: Any  # [] bool


class SegmentResult(NamedTuple):
    """One segment's output on the host."""

    rows: dict[str, np.ndarray]  # name -> [R]
    updates: np.ndarray  # [R] int64, the last update of each row (1-based)
    tail: np.ndarray  # [min(n, FINAL_WINDOW)] per-update episode_return
    nonfinite: str | None  # the NaN guard's finding, or None


class Programs(NamedTuple):
    init: Any  # compiled init(key, hp, env_params)
    segments: dict[tuple[int, int], Any]  # (length, phase) -> compiled segment
    key: Any  # the inputs they were compiled for
    hp: Any
    env_params: Any
    eval_key: Any  # None without periodic evaluation
    log_every: int = 1

    def initial_state(self) -> Any:
        """The train state before the first update."""
        return self.init(self.key, self.hp, self.env_params)

    def place(self, state: Any) -> Any:
        """``state`` (a restored checkpoint) on the devices a fresh one
        lies on, as the segment programs take it."""
        return jax.device_put(state, self.init.output_shardings)

    def run(self, state: Any, segment: Segment) -> tuple[Any, SegmentResult]:
        """Runs ``segment`` from ``state``: the new state and the segment's
        ``SegmentResult``, on the host once ready (waiting in short sleeps,
        so a second Ctrl-C acts at once)."""
        program = self.segments[segment.program]
        extra = ()
        if self.eval_key is not None:
            extra = (np.int32(segment.start), self.eval_key)
        state, logged = program(state, self.hp, self.env_params, *extra)
        logged = jax.device_get(wait_ready(logged))
        nonfinite = first_nonfinite(
            logged.first_bad, bool(logged.params_finite), segment.start, segment.length
        )
        updates = row_updates(segment.start, segment.length, self.log_every)
        return state, SegmentResult(logged.rows, updates, logged.tail, nonfinite)


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


def first_bad_updates(metrics: dict[str, jax.Array]) -> dict[str, jax.Array]:
    """``name -> [] int32``: the index of each ``[n]`` metric's first
    non-finite value, ``n`` if none (``eval_return``, NaN between
    evaluations by design, is left out)."""
    out = {}
    for name, value in metrics.items():
        if name != EVAL_METRIC:
            bad = ~jnp.isfinite(value)
            out[name] = jnp.where(bad.any(), jnp.argmax(bad), bad.shape[0])
    return jax.tree.map(lambda x: x.astype(jnp.int32), out)


def logged(metrics: dict[str, jax.Array], state: Any, log_every: int) -> Logged:
    """A segment's ``[n]`` metrics as what crosses to the host."""
    rows = log_rows(metrics, log_every, sparse=(EVAL_METRIC,))
    tail = metrics["episode_return"][-FINAL_WINDOW:]
    return Logged(rows, tail, first_bad_updates(metrics), all_finite(state.params))


def _segment_fn(trainer: Any, evaluation: Evaluation | None, log_every: int = 1):
    """``segment(state, hp, env_params, [start, eval_key,] length, phase)``."""
    run = _updates_fn(trainer, evaluation)

    def segment(state, hp, env_params, *args):
        state, metrics = run(state, hp, env_params, *args)
        return state, logged(metrics, state, log_every)

    return segment


def _updates_fn(trainer: Any, evaluation: Evaluation | None):
    """``updates(state, hp, env_params, [start, eval_key,] length, phase) ->
    (state, metrics [n])``."""
    if evaluation is None:

        def updates(state, hp, env_params, length, phase):
            return trainer.run(state, hp, env_params, length)

        return updates

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
        return state, metrics

    return segment


def first_nonfinite(
    first_bad: dict, params_ok: bool, done: int, count: int
) -> str | None:
    """The NaN guard's host half: the first non-finite metric of a segment
    of ``count`` updates ``done + 1 ...`` (``first_bad_updates``: ``count``
    where all are finite), else non-finite parameters, as one line; None if
    all is finite."""
    bad = {k: int(v) for k, v in first_bad.items() if int(v) < count}
    if bad:
        name = min(bad, key=lambda k: (bad[k], k))
        return f"non-finite {name} at update {done + bad[name] + 1}"
    if not params_ok:
        return f"non-finite parameters after update {done + count}"
    return None
