"""A population on the device, trained in rounds: what its programs compute.

``Population`` holds every member's learning state and its bookkeeping, with
a leading member axis ``[P]`` on every leaf; it stays on the device (split
over the mesh) from the first round to the last. Its programs are
``jit(vmap(...))`` over members (``programs.py`` compiles them):

* ``init(inputs) -> Population``: member ``place`` of seed ``seed``'s group
  starts from the key ``fold_in(key(seed), place)`` (members of a group
  differ in their keys as well as in their hyperparameters, so that a copy
  is not a clone), or, with ``solo_keys``, from ``key(seed)`` itself, as
  ``train --seed`` does;
* ``round(population, start, window) -> population``: ``K`` updates of
  every member (the learner's ``run``), its per-update metrics written into
  ``curves`` at update ``start``, its score over the last ``window``
  episodes and whether its parameters and metrics stayed finite (``start``
  and ``window`` traced: one program serves every round and every N).

A member's score is the mean return of its last ``N`` finished episodes,
computed in the program from the round's per-update means and counts: the
newest updates first, the update at the window's edge counted for as many
episodes as the window still needs; when the round finished fewer than ``N``
episodes, the previous score fills the rest (``window_score``). Between
rounds a strategy (``pbt.py``, ``halving.py``) may act on the population;
what crosses to the host after each round is a ``RoundRecord``.
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.devices.sharding import to_host
from ondevice_rl.env.types import replace_params
from ondevice_rl.train.kit.registry import trainer_for
from ondevice_rl.train.run.segments import all_finite

#: RoundRecord.event values.
KEPT, EXPLOITED, REFILLED = 0, 1, 2
EVENTS = ("kept", "exploited", "refilled")


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


class Inputs(NamedTuple):
    """``init``'s host arrays, ``[P]`` leading axes."""

    seed: np.ndarray  # uint32
    place: np.ndarray  # uint32: the member's place within its group
    hp: Any  # Hyperparams, float32 leaves
    env_params: Any  # the env's params
    group: np.ndarray  # int32, -1 for padding
    bracket: np.ndarray  # int32
    trial: np.ndarray  # int32


class RoundRecord(NamedTuple):
    """What crosses to the host after a round: ``[P]`` each."""

    score: jax.Array  # the round's scores, before the step
    finite: jax.Array  # whether the round stayed finite
    parent: jax.Array  # int32: the member copied from (PBT), else -1
    event: jax.Array  # int32: KEPT, EXPLOITED or REFILLED
    hp: Any  # Hyperparams after the step
    trial: jax.Array  # int32 after the step
    rung: jax.Array  # int32 after the step


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
    """``init(inputs) -> Population`` (unjitted; vmapped over members)."""
    trainer = trainer_for(config)
    names = list(metric_shapes(config))
    updates = config.num_updates

    def member(inputs: Inputs):
        key = jax.random.key(inputs.seed)
        if not solo_keys:
            key = jax.random.fold_in(key, inputs.place)
        state = trainer.init(key, inputs.hp, inputs.env_params)
        curves = {k: jnp.full((updates,), jnp.nan, jnp.float32) for k in names}
        zero = jnp.int32(0)
        return Population(
            state,
            inputs.hp,
            inputs.env_params,
            jnp.float32(jnp.nan),
            jnp.bool_(True),
            curves,
            inputs.group,
            inputs.bracket,
            zero,
            zero,
            inputs.trial,
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


def host_inputs(
    members: list,
    default_env_params: Any,
    groups: np.ndarray,
    brackets: np.ndarray | None = None,
) -> Inputs:
    """``init``'s inputs for ``members`` (all of one static config): a
    member's place numbers it within its group (padding carries group
    ``-1``), ``brackets[place]`` is its bracket (default 0), trials number
    the slots."""
    hp_class = members[0].config.HYPERPARAMS
    hp = hp_class(
        *(
            np.asarray([getattr(m.config, name) for m in members], np.float32)
            for name in hp_class._fields
        )
    )

    def member_params(m):
        params = default_env_params
        if m.env_params:
            params = replace_params(params, dict(m.env_params))
        return jax.tree.map(
            lambda value, default: np.asarray(value, np.asarray(default).dtype),
            params,
            default_env_params,
        )

    per_member = [member_params(m) for m in members]
    env_params = jax.tree.map(lambda *xs: np.stack(xs), *per_member)
    groups = np.asarray(groups, np.int32)
    place = np.asarray([np.sum(groups[:i] == g) for i, g in enumerate(groups)])
    bracket = np.zeros(len(members), np.int32)
    if brackets is not None:
        real = groups >= 0
        bracket[real] = np.asarray(brackets)[place[real]]
    return Inputs(
        np.asarray([m.seed for m in members], np.uint32),
        place.astype(np.uint32),
        hp,
        env_params,
        groups,
        bracket,
        np.arange(len(members), dtype=np.int32),
    )


# --- between rounds: what every strategy shares ------------------------------------


def ranks(pop: Population, together: jax.Array) -> jax.Array:
    """``[P]`` rank of each member among those it is ``together`` with
    (``[P, P]``; 0 = best score, non-finite last, ties by index)."""
    good = pop.finite & jnp.isfinite(pop.score)
    s = jnp.where(good, pop.score, -jnp.inf)
    index = jnp.arange(s.shape[0])
    better = (s[None, :] > s[:, None]) | (
        (s[None, :] == s[:, None]) & (index[None, :] < index[:, None])
    )
    return jnp.sum(together & better, axis=1).astype(jnp.int32)


def step_key(seed, round_index) -> jax.Array:
    return jax.random.fold_in(jax.random.key(seed), round_index)


def record(pop: Population, before: Population, parent, event) -> RoundRecord:
    """The record of a step that turned ``before`` into ``pop``."""
    return RoundRecord(
        before.score, before.finite, parent, event, pop.hp, pop.trial, pop.rung
    )


def host_record(pop: Population) -> RoundRecord:
    """The record of a round no step follows, as host arrays: the
    population as it is."""
    score, finite, hp, trial, rung = to_host(
        (pop.score, pop.finite, pop.hp, pop.trial, pop.rung)
    )
    none = np.full(score.shape, -1, np.int32)
    return RoundRecord(score, finite, none, np.zeros_like(none), hp, trial, rung)
