"""A whole population on the device, trained in rounds, as one program.

``Population`` holds every member's learning state and its bookkeeping, with
a leading member axis ``[P]`` on every leaf; it stays on the device (split
over the mesh) from the first round to the last. Two compiled programs act
on it, both ``jit(vmap(...))`` over members and donating the population:

* ``init(seed, place, hp, env_params, group, bracket, trial) ->
  Population``: member ``place`` of seed ``seed``'s group starts from the key
  ``fold_in(key(seed), place)`` (members of a group differ in their keys as
  well as in their hyperparameters, so that a copy is not a clone);
* ``round(population, start, window) -> population``: ``K`` updates of
  every member (the learner's ``run``), its per-update metrics written into
  ``curves`` at update ``start``, its score over the last ``window``
  episodes and whether its parameters and metrics stayed finite (``start``
  and ``window`` traced: one program serves every round and every N).

A member's score is the mean return of its last ``N`` finished episodes,
computed in the program from the round's per-update means and counts: the
newest updates first, the update at the window's edge counted for as many
episodes as the window still needs; when the round finished fewer than ``N``
episodes, the previous score fills the rest (``window_score``). Search
strategies (``strategies.py``) then act on the population between rounds.
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.train.kit.registry import trainer_for
from ondevice_rl.train.run.segments import all_finite


class Population(NamedTuple):
    """Every member's learning state and bookkeeping; leaves ``[P, ...]``."""

    state: Any  # the learner's TrainState: params, optimiser, normaliser, buffer
    hp: Any  # Hyperparams, [P] float32 leaves
    env_params: Any  # the env's params, [P, ...]
    score: jax.Array  # [P] float32: mean return of the last N episodes (NaN: none)
    finite: jax.Array  # [P] bool: parameters and metrics finite this round
    curves: dict  # metric name -> [P, U] float32, NaN where not trained yet
    group: jax.Array  # [P] int32: the search seed a member belongs to; -1 padding
    bracket: jax.Array  # [P] int32: its bracket (successive halving), else 0
    birth: jax.Array  # [P] int32: the round its current trial started
    rung: jax.Array  # [P] int32: rungs its current trial has passed
    trial: jax.Array  # [P] int32: which trial the member is (new ones count on)


def window_score(
    returns: jax.Array, counts: jax.Array, previous: jax.Array, window: Any
) -> jax.Array:
    """Mean return of the last ``window`` finished episodes (see the module
    docstring) from one round's ``[K]`` per-update mean returns and episode
    counts; ``previous`` the score before the round."""
    newest_first = returns[::-1], counts[::-1]
    r, c = newest_first
    newer = jnp.cumsum(c) - c
    weight = jnp.clip(window - newer, 0.0, c)
    taken = weight.sum()
    total = jnp.sum(jnp.where(weight > 0, weight * r, 0.0))
    blended = (total + (window - taken) * previous) / window
    own = jnp.where(taken > 0, total / jnp.maximum(taken, 1.0), returns[-1])
    return jnp.where(jnp.isfinite(previous), blended, own).astype(jnp.float32)


def metric_shapes(config: Any) -> dict[str, Any]:
    """The learner's per-update metrics (name -> ``ShapeDtypeStruct``)."""
    trainer = trainer_for(config)
    state = jax.eval_shape(trainer.init, jax.random.key(0), config.hyperparams)
    _, metrics = jax.eval_shape(
        lambda s: trainer.run(s, config.hyperparams, None, 1), state
    )
    return {k: jax.ShapeDtypeStruct((), v.dtype) for k, v in metrics.items()}


def init_fn(config: Any, solo_keys: bool = False):
    """``init(seed [P], place [P], hp, env_params, group [P], bracket [P],
    trial [P]) -> Population`` (unjitted; vmapped over members). With
    ``solo_keys`` a member starts from ``key(seed)`` itself, as ``train
    --seed`` does (for groups of one member)."""
    trainer = trainer_for(config)
    names = list(metric_shapes(config))
    updates = config.num_updates

    def member(seed, place, hp, env_params, group, bracket, trial):
        key = jax.random.key(seed)
        if not solo_keys:
            key = jax.random.fold_in(key, place)
        state = trainer.init(key, hp, env_params)
        curves = {k: jnp.full((updates,), jnp.nan, jnp.float32) for k in names}
        zero = jnp.int32(0)
        return Population(
            state,
            hp,
            env_params,
            jnp.float32(jnp.nan),
            jnp.bool_(True),
            curves,
            group,
            bracket,
            zero,
            zero,
            trial,
        )

    return jax.vmap(member)


def round_fn(config: Any, length: int):
    """``round(population, start, window) -> population``: ``length``
    updates of every member from update ``start`` (unjitted)."""
    trainer = trainer_for(config)

    def member(pop: Population, start, window):
        state, metrics = trainer.run(pop.state, pop.hp, pop.env_params, length)
        finite = all_finite(state.params)
        for values in metrics.values():
            finite &= jnp.all(jnp.isfinite(values))
        score = window_score(
            metrics["episode_return"],
            metrics["episodes"].astype(jnp.float32),
            pop.score,
            window,
        )
        curves = {
            k: jax.lax.dynamic_update_slice(
                pop.curves[k], metrics[k].astype(jnp.float32), (start,)
            )
            for k in pop.curves
        }
        return pop._replace(state=state, score=score, finite=finite, curves=curves)

    return jax.vmap(member, in_axes=(0, None, None))


def host_inputs(members: list, default_env_params: Any, groups: np.ndarray) -> tuple:
    """``(seed, place, hp, env_params, group, bracket, trial)`` host arrays of
    ``members`` (padded ones carry group ``-1``), for ``init``: ``place``
    numbers a member within its group, brackets are zero, trials number the
    slots."""
    from ondevice_rl.train.sweep.program import stack_inputs

    inputs = stack_inputs(members, default_env_params)
    groups = np.asarray(groups, np.int32)
    place = np.asarray([np.sum(groups[:i] == g) for i, g in enumerate(groups)])
    return (
        inputs.seed,
        place.astype(np.uint32),
        inputs.hp,
        inputs.env_params,
        groups,
        np.zeros(len(members), np.int32),
        np.arange(len(members), dtype=np.int32),
    )
