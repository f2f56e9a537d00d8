"""Search strategies: what happens to a population between rounds.

Each strategy gives ``step(population, seed, round, space, base_hp,
coefficients) -> (population, RoundRecord)``, one jitted function on the
device: its random choices come from ``fold_in(key(seed), round)``; the
search space (``search_space.SearchSpace``), the base hyperparameters and
the strategy's coefficients are traced arguments, so new values never
recompile. Only the record (scores, who copied whom, hyperparameters:
``[P]`` each) goes to the host. Members are compared only within their group
(one search seed), and non-finite members (flagged by the round) never count
as good.

* ``PBT``: population-based training. In each group the worst ``fraction``
  (at least one member, at most half) copies the whole learning state
  (parameters, optimiser state, normaliser, replay buffer, env states; not
  its own PRNG key) of a member drawn uniformly from the best ``fraction``
  (exploit), then perturbs the copied hyperparameters (explore:
  ``search_space.explore``). A non-finite member ranks last, so it is
  replaced first. The number of copies per round is fixed, so only those
  rows move.
* ``Halving``: successive halving with freed slots refilled. A trial is
  judged when its age in rounds reaches a rung, ``min_rounds * eta**j``
  (bracket ``b`` of ``brackets``, Hyperband style, starts at ``min_rounds *
  eta**b``); among the trials of its cohort (same group, bracket and first
  round) the best ``1/eta`` (rounded up) go on, the rest stop, as does any
  non-finite trial at once. A stopped slot starts a fresh trial at once (new
  hyperparameters sampled from the search, a new learning state), so the
  program keeps its batch shape and never recompiles.
* ``Independent``: nothing between rounds (random search in rounds, the
  baseline the others are compared with).
"""

import dataclasses
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.train.kit.registry import trainer_for
from ondevice_rl.train.sweep import search_space
from ondevice_rl.train.sweep.population import Population
from ondevice_rl.train.sweep.space import SweepSpecError

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


def _ranks(pop: Population, together: jax.Array) -> jax.Array:
    """``[P]`` rank of each member among those it is ``together`` with
    (``[P, P]``; 0 = best score, non-finite last, ties by index)."""
    good = pop.finite & jnp.isfinite(pop.score)
    s = jnp.where(good, pop.score, -jnp.inf)
    index = jnp.arange(s.shape[0])
    better = (s[None, :] > s[:, None]) | (
        (s[None, :] == s[:, None]) & (index[None, :] < index[:, None])
    )
    return jnp.sum(together & better, axis=1).astype(jnp.int32)


def _key(seed, round_index) -> jax.Array:
    return jax.random.fold_in(jax.random.key(seed), round_index)


def _record(pop: Population, before: Population, parent, event) -> RoundRecord:
    return RoundRecord(
        before.score, before.finite, parent, event, pop.hp, pop.trial, pop.rung
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

    def step_fn(self, config, groups: int, group_size: int, rounds: int):
        def step(pop, seed, round_index, space, base_hp, coefficients):
            none = jnp.full(pop.score.shape, -1, jnp.int32)
            return pop, _record(pop, pop, none, jnp.zeros_like(none))

        return step


@dataclasses.dataclass(frozen=True)
class PBT:
    """Population-based training (see the module docstring).

    Attributes:
        fraction: share of each group that copies, and that is copied from.
        resample_prob: chance that explore resamples a value rather than
            scaling it by 0.8 or 1.25 (or moving one choice).
    """

    fraction: float = 0.25
    resample_prob: float = 0.25
    name = "pbt"

    def __post_init__(self):
        if not 0 < self.fraction <= 0.5:
            raise SweepSpecError(
                f"PBT fraction must be in (0, 0.5], got {self.fraction}"
            )
        if not 0 <= self.resample_prob <= 1:
            raise SweepSpecError(
                f"PBT resample probability must be in [0, 1], got {self.resample_prob}"
            )

    def copies(self, group_size: int) -> int:
        """Members of a group that copy another each round."""
        return max(1, min(math.floor(self.fraction * group_size), group_size // 2))

    def check(self, group_size: int, rounds: int) -> None:
        if group_size < 2:
            raise SweepSpecError(
                "PBT needs at least 2 members per seed to copy from (--samples)"
            )

    def static_key(self) -> tuple:
        return (self.name, self.fraction)

    def coefficients(self) -> tuple:
        return (np.float32(self.resample_prob),)

    def brackets_of(self, group_size: int) -> np.ndarray:
        return np.zeros(group_size, np.int32)

    def step_fn(self, config, groups: int, group_size: int, rounds: int):
        k = self.copies(group_size)

        def step(pop: Population, seed, round_index, space, base_hp, coefficients):
            (resample_prob,) = coefficients
            key = _key(seed, round_index)
            valid = pop.group >= 0
            together = (pop.group[:, None] == pop.group[None, :]) & valid[None, :]
            rank = _ranks(pop, together)
            index = jnp.arange(rank.shape[0], dtype=jnp.int32)
            drop = groups * group_size  # out of bounds: dropped by the scatters
            by_rank = jnp.zeros(groups * group_size, jnp.int32)
            by_rank = by_rank.at[
                jnp.where(valid, pop.group * group_size + rank, drop)
            ].set(index, mode="drop")
            place = rank - (group_size - k)  # a loser's place among its group's k
            losers = jnp.zeros(groups * k, jnp.int32)
            losers = losers.at[
                jnp.where(valid & (place >= 0), pop.group * k + place, groups * k)
            ].set(index, mode="drop")
            good = valid & pop.finite & jnp.isfinite(pop.score)
            good_in_group = (
                jnp.zeros(groups, jnp.int32)
                .at[jnp.where(valid, pop.group, groups)]
                .add(good.astype(jnp.int32), mode="drop")
            )
            loser_group = jnp.arange(groups * k) // k
            pool = jnp.minimum(k, good_in_group[loser_group])
            pick_key, explore_key = jax.random.split(key)
            picks = jax.random.randint(pick_key, (groups * k,), 0, jnp.maximum(pool, 1))
            donors = by_rank[loser_group * group_size + picks]
            copy = pool > 0
            donors = jnp.where(copy, donors, losers)

            def moved(x):
                return x.at[losers].set(x[donors])

            own_keys = pop.state.rollout.key
            state = jax.tree.map(moved, pop.state)
            state = state._replace(rollout=state.rollout._replace(key=own_keys))
            donor_hp = jax.tree.map(lambda x: x[donors], pop.hp)
            keys = jax.random.split(explore_key, groups * k)
            explored = jax.vmap(
                lambda hp, key: search_space.explore(space, hp, key, resample_prob)
            )(donor_hp, keys)
            explored = jax.tree.map(
                lambda new, old: jnp.where(copy, new, old), explored, donor_hp
            )
            hp = jax.tree.map(lambda x, new: x.at[losers].set(new), pop.hp, explored)
            parent = jnp.full(rank.shape, -1, jnp.int32)
            parent = parent.at[losers].set(jnp.where(copy, donors, -1))
            new = pop._replace(
                state=state,
                hp=hp,
                score=moved(pop.score),
                finite=moved(pop.finite),
            )
            event = jnp.where(parent >= 0, EXPLOITED, KEPT).astype(jnp.int32)
            return new, _record(new, pop, parent, event)

        return step


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

    def step_fn(self, config, groups: int, group_size: int, rounds: int):
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
            key = _key(seed, round_index)
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
            rank = _ranks(pop, cohort)
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
            return new, _record(new, pop, jnp.full_like(event, -1), event)

        return step


def _refill(trainer, space, base, pop: Population, stop, key, round_index):
    """``pop`` with the ``stop`` members replaced by fresh trials."""
    count = stop.shape[0]
    keys = jax.random.split(jax.random.fold_in(key, round_index), 2 * count)
    hp = jax.vmap(lambda k: search_space.sample(space, base, k))(keys[:count])
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


STRATEGIES = {"pbt": PBT, "halving": Halving, "random": Independent}
