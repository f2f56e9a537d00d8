"""Copying a few members' rows of a population split over devices.

``copy_rows(tree, losers, donors, mesh)`` sets row ``losers[j]`` of every
leaf to row ``donors[j]`` (``[M]`` int32 each, the same on every device),
inside a jitted program. PRNG key leaves are left as they are (a member
keeps its own key stream).

Without a mesh this is a gather and a scatter. On a mesh, XLA's partitioner
would gather whole arrays to move a few rows; instead, under
``jax.shard_map``, each device takes the donor rows it holds (zeros for the
others), one ``psum`` over the mesh hands every device all ``M`` rows, and
each device writes the rows of the losers it holds. Only ``M`` rows cross
between devices. The rows travel as unsigned integers of their width, so the
copy is bit for bit (``-0.0`` and NaN payloads included).
"""

from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec

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
