"""How many population members fit on a device at once, and whether one
does.

Memory rule. Before compiling, ``estimate_member_bytes`` sizes one member:
its whole run (``init`` and every update) is traced, not compiled, and
``program_bytes.peak_bytes`` counts the most bytes its arrays take at once
— train state, any replay buffer, recurrent carries, one update's
trajectory, the activations and gradients of a gradient step, the metrics —
times ``HEADROOM`` for the gaps XLA's buffer packing leaves. Every run
(``train``, ``--resume``) and every sweep group goes through it: a member
that does not fit in the budget is refused in one line before anything
compiles (``check_member_fits``). A run on one device is sized by the
programs it compiles instead (``check_programs_fit``: its ``init`` and
segment programs, traced once for both, ``train/run/compile.py``).
``memory_budget`` gives the bytes free per device: on a GPU or TPU
``bytes_limit - bytes_in_use`` of ``device.memory_stats()`` (with JAX's
default preallocation the limit is the preallocated pool, 75% of the
device), on CPU the host's ``MemAvailable`` shared by its local devices;
times ``fraction``.

Chunking (sweeps). A chunk holds ``budget // bytes_per_member`` members per
device; the population is cut into ``n = ceil(P / max_chunk)`` chunks of
equal size ``ceil(P / n)`` rounded up to a multiple of the device count, the
last one padded with copies of a member, so one compile serves every chunk.
After compiling, XLA's own ``memory_analysis()`` is checked against the
budget and the chunk shrunk (one recompile) if the estimate was too low. A
cached program of the same config is reused instead when it fits the budget
and wastes at most half its work on padding.
"""

import functools
import os
from typing import Any, NamedTuple

import jax
import numpy as np
from jax.sharding import Mesh

from ondevice_rl.devices.sharding import local_device_count, mesh_size, padded_size
from ondevice_rl.train.kit.protocol import whole_run
from ondevice_rl.train.kit.registry import trainer_for
from ondevice_rl.train.services.program_bytes import peak_bytes

#: The estimate is the traced program's peak count times this. XLA's buffer
#: assignment leaves gaps when it packs the values into its scratch memory:
#: on CPU, the count came to 0.71-1.15× XLA's arguments + outputs + scratch
#: for every learner's tiny and default configs, recurrent and image ones
#: included (1.9× where XLA:CPU fuses a whole forward pass away).
HEADROOM = 1.5


@functools.lru_cache(maxsize=32)
def estimate_member_bytes(config: Any) -> int:
    """Device bytes one run of ``config`` needs (traced, nothing compiled);
    see the module docstring."""
    train = whole_run(trainer_for(config))
    program = jax.make_jaxpr(train)(jax.random.key(0), config.hyperparams)
    return int(HEADROOM * peak_bytes(program))


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def check_member_fits(config: Any, budget: int, what: str = "this run") -> int:
    """The estimate of ``config``'s member, or ValueError (one line) when it
    exceeds ``budget`` bytes."""
    return _refuse_over(estimate_member_bytes(config), budget, what)


def _refuse_over(need: int, budget: int, what: str) -> int:
    if need > budget:
        raise ValueError(
            f"{what} needs about {_gib(need)} of device memory (train state, any "
            f"replay buffer, one update's data and activations) but {_gib(budget)} "
            "are free; use fewer envs or steps, a smaller buffer or smaller networks"
        )
    return need


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
    (bytes per device; default ``memory_budget(mesh)``); ValueError (one
    line) if not even one member fits."""
    budget = memory_budget(mesh) if budget is None else budget
    per_member = max(1, check_member_fits(config, budget, "one member"))
    return max(1, budget // per_member) * mesh_size(mesh), per_member


def device_budget(fraction: float = 0.9) -> int:
    """``fraction`` of the first device's free bytes: what one program on it
    may use."""
    device = jax.devices()[0]
    return memory_budget(Mesh(np.asarray([device], dtype=object), ("pop",)), fraction)


def check_fits(config: Any, fraction: float = 0.9) -> int:
    """ValueError (one line) if one run of ``config`` would not fit in
    ``fraction`` of one device's free memory; returns the estimate."""
    return check_member_fits(config, device_budget(fraction))


def check_programs_fit(programs: list[jax.stages.Traced], fraction: float = 0.9) -> int:
    """``check_fits`` of a run by the programs it compiles (its ``init`` and
    segments, traced): the most any of them takes, times ``HEADROOM``; 0
    when there are none (all compiled before)."""
    if not programs:
        return 0
    need = int(HEADROOM * max(peak_bytes(p.jaxpr) for p in programs))
    return _refuse_over(need, device_budget(fraction), "this run")
