"""Successive halving between rounds, freed slots refilled (Jamieson and
Talwalkar, 2016; Hyperband-style brackets after Li et al., 2018).

A trial is judged when its age in rounds reaches a rung, ``min_rounds *
eta**j`` (bracket ``b`` of ``brackets`` starts at ``min_rounds * eta**b``);
among the trials of its cohort (same group, bracket and first round) the
best ``1/eta`` (rounded up) go on, the rest stop, as does any non-finite
trial at once. A stopped slot starts a fresh trial at once (new
hyperparameters sampled from the search, a new learning state), so the
program keeps its batch shape and never recompiles.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.train.kit.registry import trainer_for
from ondevice_rl.train.sweep.population import (
    KEPT,
    REFILLED,
    Population,
    ranks,
    record,
    step_key,
)
from ondevice_rl.train.sweep.space import SweepSpecError, sample


def rung_ages(min_rounds: int, eta: int, bracket: int, rounds: int) -> list[int]:
    """Ages (rounds trained) at which a trial of ``bracket`` is judged."""
    ages, age = [], min_rounds * eta**bracket
    while age < rounds:
        ages.append(age)
        age *= eta
    return ages


@dataclasses.dataclass(frozen=True)
class Halving:
    """Successive halving with refills (see the module docstring).

    Attributes:
        eta: 1/eta of a cohort goes on at each rung (2: halving).
        min_rounds: a trial's age (rounds) at its first rung.
        brackets: Hyperband-style brackets; slots are dealt to them in turn
            and bracket ``b`` is first judged at ``min_rounds * eta**b``.
    """

    eta: int = 2
    min_rounds: int = 1
    brackets: int = 1
    name = "halving"

    def __post_init__(self):
        for name in ("eta", "min_rounds", "brackets"):
            value = getattr(self, name)
            least = 2 if name == "eta" else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise SweepSpecError(
                    f"halving {name} must be an integer >= {least}, got {value!r}"
                )

    def check(self, group_size: int, rounds: int) -> None:
        if group_size < self.eta:
            raise SweepSpecError(
                f"successive halving needs at least eta={self.eta} members per seed"
            )
        if not rung_ages(self.min_rounds, self.eta, self.brackets - 1, rounds):
            raise SweepSpecError(
                f"no rung falls within the {rounds} round(s): bracket "
                f"{self.brackets - 1} is first judged after "
                f"{self.min_rounds * self.eta ** (self.brackets - 1)} rounds; use "
                "fewer brackets, a smaller min rounds or more rounds"
            )

    def static_key(self) -> tuple:
        return (self.name, self.eta, self.min_rounds, self.brackets)

    def coefficients(self) -> tuple:
        return ()

    def brackets_of(self, group_size: int) -> np.ndarray:
        """``[group_size]``: the bracket of each slot of a group."""
        return np.arange(group_size, dtype=np.int32) % self.brackets

    def step_fn(self, config, groups: int, group_size: int, rounds: int, mesh=None):
        trainer = trainer_for(config)
        ages = [
            rung_ages(self.min_rounds, self.eta, b, rounds)
            for b in range(self.brackets)
        ]
        width = max(len(a) for a in ages)
        table = np.full((self.brackets, width), -1, np.int32)
        for b, a in enumerate(ages):
            table[b, : len(a)] = a
        eta = self.eta

        def step(pop: Population, seed, round_index, space, base, coefficients):
            key = step_key(seed, round_index)
            valid = pop.group >= 0
            age = round_index + 1 - pop.birth
            at_rung = valid & jnp.any(
                age[:, None] == jnp.asarray(table)[pop.bracket], 1
            )
            cohort = (
                (pop.group[:, None] == pop.group[None, :])
                & (pop.bracket[:, None] == pop.bracket[None, :])
                & (pop.birth[:, None] == pop.birth[None, :])
                & at_rung[None, :]
                & at_rung[:, None]
            )
            rank = ranks(pop, cohort)
            keep = rank < -(-jnp.sum(cohort, axis=1) // eta)
            good = pop.finite & jnp.isfinite(pop.score)
            stop = valid & (~good | (at_rung & ~keep))
            rung = jnp.where(at_rung & keep, pop.rung + 1, pop.rung)
            pop = pop._replace(rung=rung)
            new = jax.lax.cond(
                jnp.any(stop),
                lambda p: _refill(trainer, space, base, p, stop, key, round_index),
                lambda p: p,
                pop,
            )
            event = jnp.where(stop, REFILLED, KEPT).astype(jnp.int32)
            return new, record(new, pop, jnp.full_like(event, -1), event)

        return step


def _refill(trainer, space, base, pop: Population, stop, key, round_index):
    """``pop`` with the ``stop`` members replaced by fresh trials."""
    count = stop.shape[0]
    keys = jax.random.split(jax.random.fold_in(key, round_index), 2 * count)
    hp = jax.vmap(lambda k: sample(space, base, k))(keys[:count])
    fresh = jax.vmap(trainer.init)(keys[count:], hp, pop.env_params)

    def pick(new, old):
        mask = stop.reshape(stop.shape + (1,) * (old.ndim - 1))
        return jnp.where(mask, new, old)

    trial = jnp.max(pop.trial) + jnp.cumsum(stop.astype(jnp.int32))
    return pop._replace(
        state=jax.tree.map(pick, fresh, pop.state),
        hp=jax.tree.map(pick, hp, pop.hp),
        score=jnp.where(stop, jnp.nan, pop.score),
        finite=jnp.where(stop, True, pop.finite),
        birth=jnp.where(stop, round_index + 1, pop.birth),
        rung=jnp.where(stop, 0, pop.rung),
        trial=jnp.where(stop, trial, pop.trial),
    )
