"""Place populations and batches on a mesh of devices (``jax.sharding``).

Two layouts are used by the library:

* **Population axis** (sweeps): every leaf of the population pytree has a
  leading member axis ``[P, ...]``; it is split over all devices of a 1-D mesh
  (axis ``"pop"``) and ``jax.jit`` partitions the vmapped program along it.
  Members never talk to each other, so no collectives are needed.
* **Data axis** (one large run): the environment batch is split over a 1-D
  mesh (axis ``"data"``) inside ``jax.shard_map`` and gradients are averaged
  with ``lax.pmean`` (see ``ondevice_rl.train.ppo.data_parallel``).

Every function works the same on one host or many (JAX's multi-controller
runtime, see ``ondevice_rl.devices.distributed``): ``jax.devices()`` then lists the
devices of all processes, each process supplies the shards its own devices
hold, and ``to_host`` gathers results back. Every process must call these
functions in the same order with the same (host) data.
"""

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

POP_AXIS = "pop"
DATA_AXIS = "data"


def make_mesh(
    axis_name: str = POP_AXIS, devices: Sequence[jax.Device] | None = None
) -> Mesh:
    """A 1-D mesh over ``devices`` (default: every device of every process)."""
    devices = jax.devices() if devices is None else list(devices)
    if not devices:
        raise ValueError("make_mesh needs at least one device")
    return Mesh(np.asarray(devices, dtype=object), (axis_name,))


def mesh_size(mesh: Mesh) -> int:
    """Number of devices in ``mesh``."""
    return int(mesh.devices.size)


def leading_axis_sharding(mesh: Mesh, axis_name: str | None = None) -> NamedSharding:
    """Splits axis 0 of an array over the mesh axis (default: the first)."""
    axis_name = mesh.axis_names[0] if axis_name is None else axis_name
    return NamedSharding(mesh, PartitionSpec(axis_name))


def replicated_sharding(mesh: Mesh) -> NamedSharding:
    """The same full array on every device of ``mesh``."""
    return NamedSharding(mesh, PartitionSpec())


def padded_size(n: int, multiple: int) -> int:
    """Smallest multiple of ``multiple`` that is ``>= n`` (and ``>= multiple``)."""
    if multiple < 1:
        raise ValueError(f"multiple must be >= 1, got {multiple}")
    return max(multiple, -(-n // multiple) * multiple)


def pad_leading(tree: Any, size: int) -> Any:
    """Pads every leaf ``[n, ...]`` to ``[size, ...]`` by repeating row 0.

    Repeating a real member (rather than zeros) keeps padded members' inputs
    valid, so they cannot produce NaNs or slow paths; their outputs are
    dropped by the caller. Leaves are host (numpy) arrays.
    """

    def pad(x):
        x = np.asarray(x)
        n = x.shape[0]
        if n > size:
            raise ValueError(f"cannot pad {n} rows down to {size}")
        if n == size:
            return x
        return np.concatenate([x, np.repeat(x[:1], size - n, axis=0)], axis=0)

    return jax.tree.map(pad, tree)


def put_sharded(tree: Any, sharding: jax.sharding.Sharding) -> Any:
    """Host (numpy) leaves → global ``jax.Array`` leaves laid out by ``sharding``.

    Uses ``jax.make_array_from_callback``, so on several hosts each process
    only transfers the shards its own devices hold (all processes pass the
    same host data). On one host this is ``jax.device_put``.
    """

    def put(x):
        x = np.asarray(x)
        if sharding.is_fully_addressable:
            return jax.device_put(x, sharding)
        return jax.make_array_from_callback(x.shape, sharding, lambda idx: x[idx])

    return jax.tree.map(put, tree)


def shard_leading(tree: Any, mesh: Mesh, axis_name: str | None = None) -> Any:
    """Puts host leaves ``[P, ...]`` on ``mesh`` with axis 0 split over it.

    ``P`` must be a multiple of the mesh size (see ``pad_leading``).
    """
    n = mesh_size(mesh)
    for x in jax.tree.leaves(tree):
        if np.shape(x)[0] % n:
            raise ValueError(
                f"leading axis {np.shape(x)[0]} is not a multiple of the "
                f"{n} devices of the mesh; pad it first (pad_leading)"
            )
    return put_sharded(tree, leading_axis_sharding(mesh, axis_name))


def to_host(tree: Any) -> Any:
    """Global ``jax.Array`` leaves → numpy arrays holding the full global value.

    Arrays split over several processes are gathered with
    ``multihost_utils.process_allgather`` (a collective: every process must
    call ``to_host`` on the same arrays in the same order); replicated ones are
    read from a local copy.
    """

    def fetch(x):
        if not isinstance(x, jax.Array) or x.is_fully_addressable:
            return np.asarray(x)
        if x.sharding.is_fully_replicated:  # every process holds all of it
            return np.asarray(x.addressable_data(0))
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(x, tiled=True))

    return jax.tree.map(fetch, tree)


def local_device_count(mesh: Mesh) -> int:
    """Devices of ``mesh`` that belong to this process."""
    pid = jax.process_index()
    return sum(d.process_index == pid for d in mesh.devices.flat)


def all_mean(tree: Any, axis_name: str = DATA_AXIS) -> Any:
    """``lax.pmean`` of every leaf over a mesh axis (inside ``jax.shard_map``)."""
    return jax.tree.map(lambda x: jax.lax.pmean(x, axis_name), tree)


def all_masked_mean(
    x: jax.Array, mask: jax.Array, fallback: jax.Array, axis_name: str = DATA_AXIS
) -> jax.Array:
    """Mean of ``x`` where ``mask`` over the shards of all devices (a scalar).

    Inside ``jax.shard_map``: sums and counts are ``psum``-ed, so the result is
    the mean over the global batch, or ``fallback`` when no entry is set.
    """
    count = jax.lax.psum(mask.sum(), axis_name)
    total = jax.lax.psum(jax.numpy.where(mask, x, 0.0).sum(), axis_name)
    mean = total / jax.numpy.maximum(count, 1)
    return jax.numpy.where(count > 0, mean, fallback).astype(jax.numpy.float32)
