"""Search strategies: what happens to a population between rounds.

Each strategy's ``step_fn(config, groups, group_size, rounds, mesh)`` gives
``step(population, seed, round, space, base_hp, coefficients) ->
(population, RoundRecord)``, one jitted function on the
device: its random choices come from ``fold_in(key(seed), round)``; the
search space (``search_space.SearchSpace``), the base hyperparameters and
the strategy's coefficients are traced arguments, so new values never
recompile. Only the record (scores, who copied whom, hyperparameters:
``[P]`` each) goes to the host. Members are compared only within their group
(one search seed), and non-finite members (flagged by the round) never count
as good.

* ``PBT`` (``pbt.py``): the worst of each group copy the best's whole
  learning state and perturb its hyperparameters;
* ``Halving`` (``halving.py``): successive halving, stopped slots refilled
  with fresh samples, Hyperband-style brackets;
* ``Independent``: nothing between rounds (random search in rounds, the
  baseline the others are compared with).
"""

import dataclasses

import jax.numpy as jnp
import numpy as np

from ondevice_rl.train.sweep.halving import Halving, rung_ages
from ondevice_rl.train.sweep.pbt import PBT
from ondevice_rl.train.sweep.rounds import (
    EVENTS,
    EXPLOITED,
    KEPT,
    REFILLED,
    RoundRecord,
    record,
)


@dataclasses.dataclass(frozen=True)
class Independent:
    """No exploit, no stopping: every member trains its own trial."""

    name = "random"

    def check(self, group_size: int, rounds: int) -> None:
        del group_size, rounds

    def static_key(self) -> tuple:
        return (self.name,)

    def coefficients(self) -> tuple:
        return ()

    def brackets_of(self, group_size: int) -> np.ndarray:
        return np.zeros(group_size, np.int32)

    def step_fn(self, config, groups: int, group_size: int, rounds: int, mesh=None):
        def step(pop, seed, round_index, space, base_hp, coefficients):
            none = jnp.full(pop.score.shape, -1, jnp.int32)
            return pop, record(pop, pop, none, jnp.zeros_like(none))

        return step


STRATEGIES = {"pbt": PBT, "halving": Halving, "random": Independent}

__all__ = [
    "EVENTS",
    "EXPLOITED",
    "KEPT",
    "REFILLED",
    "STRATEGIES",
    "Halving",
    "Independent",
    "PBT",
    "RoundRecord",
    "rung_ages",
]
