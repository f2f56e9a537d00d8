"""XLA CPU settings that must be in place before the JAX backend starts.

* The scheduler flag: jaxlib 0.10.2's CPU runtime could deadlock when one
  compiled program ran several times in a process; we add
  ``--xla_cpu_enable_concurrency_optimized_scheduler=false`` unless the user
  already chose a value (the docs' CPU notes, ``docs/cpu-notes.md``, say
  what we found the cause to be and what else guards against it).
* ``use_cpu_cores``: present the CPU as one JAX device per core, so that a
  population (seeds, sweep members) split over devices runs on every core.
"""

import os
import re

CPU_SCHEDULER_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler"
DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"


def ensure_cpu_scheduler_flag() -> None:
    """Append the scheduler flag to ``XLA_FLAGS`` unless the user set it."""
    flags = os.environ.get("XLA_FLAGS", "")
    if CPU_SCHEDULER_FLAG not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {CPU_SCHEDULER_FLAG}=false".strip()


def cpu_core_count() -> int:
    """Cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def use_cpu_cores(count: int | None = None) -> int:
    """Makes the CPU backend show ``count`` devices (default: one per core).

    XLA:CPU runs one program on essentially one core when its operations are
    small (PPO's are); a population split over several CPU devices (see
    ``ondevice_rl.sharding``) runs one slice per device, in parallel. Call it
    before the first JAX computation. A device count the user already gave
    in ``XLA_FLAGS`` (``--xla_force_host_platform_device_count``) wins.

    Returns the CPU device count that will be used. Once the backend has
    started, ``count=None`` leaves the count as it is (and returns it), while
    a different explicit count raises ``RuntimeError``. ``count < 1`` raises
    ``ValueError``.
    """
    import jax

    if count is not None and count < 1:
        raise ValueError(f"CPU device count must be >= 1, got {count}")
    user = re.search(rf"{DEVICE_COUNT_FLAG}=(\d+)", os.environ.get("XLA_FLAGS", ""))
    if user:
        return int(user.group(1))
    from jax._src import xla_bridge

    if count is None and xla_bridge.backends_are_initialized():
        return len(jax.devices("cpu"))
    count = cpu_core_count() if count is None else count
    try:
        jax.config.update("jax_num_cpu_devices", count)
    except RuntimeError as e:
        raise RuntimeError(
            f"cannot switch to {count} CPU devices: the JAX backend has already "
            "started; call use_cpu_cores before the first JAX computation"
        ) from e
    return count
