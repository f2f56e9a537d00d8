"""Population-based training between rounds (Jaderberg et al., 2017).

In each group the worst ``fraction`` (at least one member, at most half)
copies the whole learning state (parameters, optimiser state, normaliser,
replay buffer, env states; not its own PRNG key) of a member drawn uniformly
from the best ``fraction`` (exploit), then perturbs the copied
hyperparameters (explore: ``space.explore``). A non-finite member
ranks last, so it is replaced first. The number of copies per round is
fixed, so only those rows of the population move.

Copying a few members' rows of a population split over devices
(``copy_rows``): without a mesh, a gather and a scatter. On a mesh, XLA's
partitioner would gather whole arrays to move a few rows; instead, under
``jax.shard_map``, each device takes the donor rows it holds (zeros for the
others), one ``psum`` over the mesh hands every device all rows copied,
and each device writes the rows of the losers it holds. Only those rows
cross between devices. The rows travel as unsigned integers of their width,
so the copy is bit for bit (``-0.0`` and NaN payloads included).
"""

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec

from ondevice_rl.train.sweep.population import (
    EXPLOITED,
    KEPT,
    Population,
    ranks,
    record,
    step_key,
)
from ondevice_rl.train.sweep.space import SweepSpecError, explore


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

    def step_fn(self, config, groups: int, group_size: int, rounds: int, mesh=None):
        k = self.copies(group_size)

        def step(pop: Population, seed, round_index, space, base_hp, coefficients):
            (resample_prob,) = coefficients
            key = step_key(seed, round_index)
            valid = pop.group >= 0
            together = (pop.group[:, None] == pop.group[None, :]) & valid[None, :]
            rank = ranks(pop, together)
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

            moved = copy_rows(
                (pop.state, pop.score, pop.finite), losers, donors, mesh
            )  # the whole learning state but the PRNG keys
            donor_hp = jax.tree.map(lambda x: x[donors], pop.hp)
            keys = jax.random.split(explore_key, groups * k)
            explored = jax.vmap(lambda hp, key: explore(space, hp, key, resample_prob))(
                donor_hp, keys
            )
            explored = jax.tree.map(
                lambda new, old: jnp.where(copy, new, old), explored, donor_hp
            )
            hp = jax.tree.map(lambda x, new: x.at[losers].set(new), pop.hp, explored)
            parent = jnp.full(rank.shape, -1, jnp.int32)
            parent = parent.at[losers].set(jnp.where(copy, donors, -1))
            state, score, finite = moved
            new = pop._replace(state=state, hp=hp, score=score, finite=finite)
            event = jnp.where(parent >= 0, EXPLOITED, KEPT).astype(jnp.int32)
            return new, record(new, pop, parent, event)

        return step


# --- moving rows between devices ------------------------------------------------

_UNSIGNED = {1: jnp.uint8, 2: jnp.uint16, 4: jnp.uint32}


def _is_key(x: jax.Array) -> bool:
    return jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def _as_bits(x: jax.Array) -> jax.Array:
    if x.dtype == jnp.bool_:
        return x.astype(jnp.uint8)
    return jax.lax.bitcast_convert_type(x, _UNSIGNED[x.dtype.itemsize])


def _from_bits(bits: jax.Array, dtype: Any) -> jax.Array:
    if dtype == jnp.bool_:
        return bits.astype(jnp.bool_)
    return jax.lax.bitcast_convert_type(bits, dtype)


def copy_rows(tree: Any, losers: jax.Array, donors: jax.Array, mesh: Mesh | None):
    """``tree`` (leaves ``[P, ...]``, split over ``mesh``'s first axis) with
    row ``losers[j]`` replaced by row ``donors[j]``; keys untouched."""
    if mesh is None:
        return jax.tree.map(
            lambda x: x if _is_key(x) else x.at[losers].set(x[donors]), tree
        )
    axis = mesh.axis_names[0]

    def local(tree, losers, donors):
        index = jax.lax.axis_index(axis)

        def one(x):
            if _is_key(x):
                return x
            rows = x.shape[0]
            mine = donors // rows == index
            bits = _as_bits(x[jnp.where(mine, donors % rows, 0)])
            mask = mine.reshape(mine.shape + (1,) * (bits.ndim - 1))
            bits = jax.lax.psum(jnp.where(mask, bits, 0), axis)
            at = jnp.where(losers // rows == index, losers % rows, rows)
            return x.at[at].set(_from_bits(bits, x.dtype), mode="drop")

        return jax.tree.map(one, tree)

    split, same = PartitionSpec(axis), PartitionSpec()
    return jax.shard_map(
        local, mesh=mesh, in_specs=(split, same, same), out_specs=split
    )(tree, losers, donors)
