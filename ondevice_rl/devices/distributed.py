"""Several hosts: start JAX's multi-controller runtime from flags or env vars.

Every host runs the same command; ``jax.distributed.initialize`` connects them
through a coordinator (process 0's ``host:port``). Afterwards ``jax.devices()``
lists the devices of all processes, a mesh over them spans hosts, and one
``jax.jit`` program runs on all of them (see ``ondevice_rl.devices.sharding``).

Settings, command-line flags first, then environment variables:

==================  ==============================  =========================
flag                variable                        meaning
==================  ==============================  =========================
``--coordinator``   ``ONDEVICE_RL_COORDINATOR``     ``host:port`` of process 0,
                                                    or ``auto`` (let JAX detect
                                                    SLURM, Cloud TPU, ...)
``--num-processes`` ``ONDEVICE_RL_NUM_PROCESSES``   number of processes
``--process-id``    ``ONDEVICE_RL_PROCESS_ID``      this process, ``0..N-1``
==================  ==============================  =========================

With none of them set the program stays single-process. On CPU, collectives
between processes go through gloo (``jax_cpu_collectives_implementation``).
This module must be used before any JAX computation starts the backend.
"""

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass

import jax

ENV_COORDINATOR = "ONDEVICE_RL_COORDINATOR"
ENV_NUM_PROCESSES = "ONDEVICE_RL_NUM_PROCESSES"
ENV_PROCESS_ID = "ONDEVICE_RL_PROCESS_ID"
AUTO = "auto"


@dataclass(frozen=True)
class DistributedConfig:
    """Where this process sits. ``coordinator == "auto"`` leaves the other
    fields to JAX's cluster detection (they are then ``None``)."""

    coordinator: str
    num_processes: int | None
    process_id: int | None


def _int(name: str, value: str | int | None) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an integer, got {value!r}") from None


def config_from_env(
    coordinator: str | None = None,
    num_processes: int | str | None = None,
    process_id: int | str | None = None,
    environ: Mapping[str, str] | None = None,
) -> DistributedConfig | None:
    """Reads the settings (arguments override environment variables).

    Returns None when nothing is set (single process).

    Raises:
        ValueError: an incomplete or inconsistent setting, with a one-line
            message naming the flag/variable to fix.
    """
    environ = os.environ if environ is None else environ
    coordinator = coordinator or environ.get(ENV_COORDINATOR) or None
    num_processes = _int(
        f"--num-processes/{ENV_NUM_PROCESSES}",
        num_processes if num_processes is not None else environ.get(ENV_NUM_PROCESSES),
    )
    process_id = _int(
        f"--process-id/{ENV_PROCESS_ID}",
        process_id if process_id is not None else environ.get(ENV_PROCESS_ID),
    )
    if coordinator is None and num_processes is None and process_id is None:
        return None
    if coordinator == AUTO:  # JAX detects what is not given
        _check_counts(num_processes, process_id)
        return DistributedConfig(AUTO, num_processes, process_id)
    missing = [
        name
        for name, value in (
            (f"--coordinator/{ENV_COORDINATOR}", coordinator),
            (f"--num-processes/{ENV_NUM_PROCESSES}", num_processes),
            (f"--process-id/{ENV_PROCESS_ID}", process_id),
        )
        if value is None
    ]
    if missing:
        raise ValueError(f"multi-host setup is missing {', '.join(missing)}")
    host, sep, port = coordinator.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(
            f"coordinator must be host:port (or {AUTO!r}), got {coordinator!r}"
        )
    _check_counts(num_processes, process_id)
    return DistributedConfig(coordinator, num_processes, process_id)


def _check_counts(num_processes: int | None, process_id: int | None) -> None:
    """ValueError (one line) for a count or an id out of range (None: not
    given)."""
    if num_processes is not None and num_processes < 1:
        raise ValueError(f"num_processes must be >= 1, got {num_processes}")
    if process_id is not None and process_id < 0:
        raise ValueError(f"process_id must be >= 0, got {process_id}")
    if num_processes is not None and process_id is not None:
        if process_id >= num_processes:
            raise ValueError(
                f"process_id must be in 0..{num_processes - 1}, got {process_id}"
            )


def is_initialized() -> bool:
    """Whether ``jax.distributed.initialize`` has run in this process."""
    return bool(jax.distributed.is_initialized())


def initialize_from_env(
    coordinator: str | None = None,
    num_processes: int | str | None = None,
    process_id: int | str | None = None,
    *,
    timeout_s: int = 300,
    environ: Mapping[str, str] | None = None,
) -> DistributedConfig | None:
    """Calls ``jax.distributed.initialize`` if a multi-host setup is given.

    Idempotent; returns the config used, or None for a single process. Call it
    before anything touches JAX devices.
    """
    config = config_from_env(coordinator, num_processes, process_id, environ)
    if config is None or is_initialized():
        return config
    # CPU processes exchange collectives through gloo; harmless on GPU/TPU.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if config.coordinator == AUTO:
        jax.distributed.initialize(
            num_processes=config.num_processes,
            process_id=config.process_id,
            initialization_timeout=timeout_s,
        )
    else:
        jax.distributed.initialize(
            coordinator_address=config.coordinator,
            num_processes=config.num_processes,
            process_id=config.process_id,
            initialization_timeout=timeout_s,
        )
    return config


def is_main_process() -> bool:
    """True on process 0 (the one that prints and writes files)."""
    return jax.process_index() == 0


def min_bytes_over_processes(nbytes: int) -> int:
    """The smallest byte count given by any process (``nbytes`` on one process).

    A collective: every process must call it. Used so that every process picks
    the same chunk size (and so the same compiled program) from its own memory
    budget. Exchanged in whole MiB as int32 (JAX's default integer width), so
    the result is rounded down to a MiB when several processes take part.
    """
    if jax.process_count() == 1:
        return int(nbytes)
    import numpy as np
    from jax.experimental import multihost_utils

    mib = np.int32(min(max(int(nbytes) >> 20, 0), np.iinfo(np.int32).max))
    values = multihost_utils.process_allgather(np.asarray([mib], np.int32))
    return int(np.min(values)) << 20


def initialize_from_args(args: argparse.Namespace) -> DistributedConfig | None:
    """``initialize_from_env`` with the CLI's ``--coordinator``,
    ``--num-processes`` and ``--process-id`` values."""
    return initialize_from_env(
        getattr(args, "coordinator", None),
        getattr(args, "num_processes", None),
        getattr(args, "process_id", None),
    )
