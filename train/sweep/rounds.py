"""What every search strategy shares between rounds: the record a step
hands to the host, and ranking members within a group.

A step's random choices come from ``step_key(seed, round)``; ``ranks``
orders members by score among those they are compared with (non-finite
members last); ``record`` builds the ``RoundRecord`` (``[P]`` each: the
round's scores and finiteness, who copied whom, what happened, the
hyperparameters, trials and rungs after the step).
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.train.sweep.population import Population

#: RoundRecord.event values.
KEPT, EXPLOITED, REFILLED = 0, 1, 2
EVENTS = ("kept", "exploited", "refilled")


class RoundRecord(NamedTuple):
    """What crosses to the host after a round: ``[P]`` each."""

    score: jax.Array  # the round's scores, before the step
    finite: jax.Array  # whether the round stayed finite
    parent: jax.Array  # int32: the member copied from (PBT), else -1
    event: jax.Array  # int32: KEPT, EXPLOITED or REFILLED
    hp: Any  # Hyperparams after the step
    trial: jax.Array  # int32 after the step
    rung: jax.Array  # int32 after the step


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
    return RoundRecord(
        before.score, before.finite, parent, event, pop.hp, pop.trial, pop.rung
    )
