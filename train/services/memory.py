"""How many population members fit on a device at once.

Memory rule (chunking). Before compiling, ``estimate_member_bytes`` sizes one
member from its config with ``jax.eval_shape`` (train state, including any
replay buffer; one update's trajectory; the activations of one gradient
batch; metrics) and ``memory_budget`` gives the
bytes free per device (``device.memory_stats()``, or on CPU the host's
``MemAvailable`` shared by its local devices, times ``fraction``). A chunk
holds ``budget // bytes_per_member`` members per device; the population is cut
into ``n = ceil(P / max_chunk)`` chunks of equal size ``ceil(P / n)`` rounded
up to a multiple of the device count, the last one padded with copies of a
member, so one compile serves every chunk. After compiling, XLA's own
``memory_analysis()`` is checked against the budget and the chunk shrunk (one
recompile) if the estimate was too low. A cached program of the same config
is reused instead when it fits the budget and wastes at most half its work on
padding.
"""

import math
import os
from typing import Any, NamedTuple

import jax
import numpy as np
from jax.sharding import Mesh

from ondevice_rl.sharding import local_device_count, mesh_size, padded_size
from ondevice_rl.train.kit.registry import trainer_for


def _tree_bytes(tree: Any) -> int:
    # PRNG key arrays have an extended dtype; count them as 2 uint32 words.
    return sum(
        math.prod(x.shape)
        * (
            8
            if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)
            else np.dtype(x.dtype).itemsize
        )
        for x in jax.tree.leaves(tree)
    )


#: An upper bound on the scalars a learner reports per update.
METRICS_PER_UPDATE = 16


def estimate_member_bytes(config: Any) -> int:
    """Rough peak device bytes of one member (shapes only; nothing compiled).

    ``2·state + 3·trajectory + 4·params + activations + 2·metrics``: the scan
    carry is double-buffered; one update's ``[steps_per_update]`` transitions
    (obs, next obs and a few scalars) are kept, reshaped and shuffled; the
    gradients, updates and Adam moments each match the params; a gradient
    batch of ``M = learn_batch_size`` keeps about ``6·M·(obs + 2·Σhidden)``
    floats for its forward/backward pass.
    """
    trainer = trainer_for(config)
    state = jax.eval_shape(trainer.init, jax.random.key(0), config.hyperparams)
    obs_dim = sum(
        math.prod(leaf.shape) for leaf in jax.tree.leaves(trainer.setup.obs_spec)
    )
    traj = 4 * config.steps_per_update * (2 * obs_dim + 8)
    activations = 4 * 6 * config.learn_batch_size * (obs_dim + 2 * sum(config.hidden))
    metrics = 4 * config.num_updates * METRICS_PER_UPDATE
    return int(
        2 * _tree_bytes(state)
        + 3 * traj
        + 4 * _tree_bytes(state.params)
        + activations
        + 2 * metrics
    )


def _host_available_bytes() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return 4 << 30


def memory_budget(mesh: Mesh, fraction: float = 0.5) -> int:
    """Bytes a population chunk may use per device of ``mesh``.

    Accelerators: ``fraction`` of the smallest ``bytes_limit - bytes_in_use``
    among this process's devices. CPU (no memory stats): ``fraction`` of the
    host's available memory, split between its local devices.
    """
    pid = jax.process_index()
    local = [d for d in mesh.devices.flat if d.process_index == pid]
    free = []
    for device in local:
        stats = device.memory_stats() or {}
        if "bytes_limit" in stats:
            free.append(stats["bytes_limit"] - stats.get("bytes_in_use", 0))
    if free:
        return int(fraction * min(free))
    return int(fraction * _host_available_bytes() / max(1, local_device_count(mesh)))


class ChunkPlan(NamedTuple):
    chunk_size: int  # members per compiled call, a multiple of the device count
    num_chunks: int

    @property
    def padded(self) -> int:
        return self.chunk_size * self.num_chunks


def plan_chunks(
    num_members: int, max_chunk: int, num_devices: int, chunk_size: int | None = None
) -> ChunkPlan:
    """Equal chunks of at most ``max_chunk`` members (see the module docstring).

    An explicit ``chunk_size`` is only rounded up to a multiple of the devices.
    """
    if chunk_size is None:
        max_chunk = max(num_devices, max_chunk // num_devices * num_devices)
        num_chunks = -(-num_members // max_chunk)
        chunk_size = -(-num_members // num_chunks)
    chunk_size = padded_size(chunk_size, num_devices)
    return ChunkPlan(chunk_size, -(-num_members // chunk_size))


def max_chunk_for(config: Any, mesh: Mesh, budget: int | None) -> tuple[int, int]:
    """``(max members per chunk, estimated bytes per member)`` under ``budget``
    (bytes per device; default ``memory_budget(mesh)``)."""
    budget = memory_budget(mesh) if budget is None else budget
    per_member = max(1, estimate_member_bytes(config))
    return max(1, budget // per_member) * mesh_size(mesh), per_member


def check_fits(config: Any, fraction: float = 0.9) -> int:
    """ValueError (one line) if one run of ``config`` would not fit in
    ``fraction`` of one device's free memory; returns the estimate."""
    device = jax.devices()[0]
    mesh = Mesh(np.asarray([device], dtype=object), ("pop",))
    budget = memory_budget(mesh, fraction)
    need = estimate_member_bytes(config)
    if need > budget:
        raise ValueError(
            f"this run needs about {need / 2**30:.1f} GiB of device memory "
            f"(train state, one update's data and activations) but "
            f"{budget / 2**30:.1f} GiB are free; use fewer envs, steps or "
            "smaller networks"
        )
    return need
