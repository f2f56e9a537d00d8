"""XLA:CPU settings of the process and of the library's population programs.

* The scheduler flag, a deadlock guard: with jaxlib 0.10.2 a vmapped PPO
  program (8 seeds) run several times in one process hung in 5 of 5 trials,
  after 1-3 runs, under XLA's defaults; with
  ``--xla_cpu_enable_concurrency_optimized_scheduler=false`` it ran 68 times
  without a hang (the cause, a batched LAPACK QR, and the other guard are in
  ``docs/cpu-notes.md``). The flag costs nothing at 1 seed and ≈8% of the
  steps per second at 16. ``ensure_cpu_scheduler_flag`` adds it to
  ``XLA_FLAGS`` unless the user chose a value; it must be there before JAX's
  CPU backend starts.
* ``compile_lowered``: the library's population programs (sweeps, searches,
  seed sets, the bench) compiled with the concurrency-optimised scheduler all
  the same where it is safe and pays: no batched LAPACK call in the program,
  8 or more members a device, 2 or more cores to each device. PPO and DQN
  populations of 16 on one device ran 18-24% faster with it, bitwise the
  same metrics; 2 to 4 members ran 7-16% slower.
* ``use_cpu_cores``: the CPU shown as one JAX device per core, so that a
  population split over devices runs on every core: on 2 cores, 16 CartPole
  seeds train 2.0-2.3× faster than on one device.
"""

import os
import re
from typing import Any

CPU_SCHEDULER_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler"
DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"
SCHEDULER_TYPE_FLAG = "--xla_cpu_scheduler_type"
# Set beside the flag when the library added it, so that child processes,
# which inherit XLA_FLAGS, still know the choice was not the user's.
ADDED_MARK = "ONDEVICE_RL_ADDED_SCHEDULER_FLAG"
CONCURRENT_SCHEDULER = {
    "xla_cpu_scheduler_type": "CPU_SCHEDULER_TYPE_CONCURRENCY_OPTIMIZED"
}
# Below this many members a device, the scheduler's gain is not certain:
# 2 and 4 members ran 7-16% slower with it for PPO or DQN, 8 ran 5-19% faster.
CONCURRENT_MIN_MEMBERS = 8
_LAPACK_CALL = re.compile(r"@lapack_\w+\(")
_BATCH_DIMS = re.compile(r'num_batch_dims = "(\d+)"')


def ensure_cpu_scheduler_flag() -> None:
    """Append the scheduler flag to ``XLA_FLAGS`` unless the user set it."""
    flags = os.environ.get("XLA_FLAGS", "")
    if CPU_SCHEDULER_FLAG not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {CPU_SCHEDULER_FLAG}=false".strip()
        os.environ[ADDED_MARK] = "1"


def scheduler_chosen_by_user() -> bool:
    """Whether ``XLA_FLAGS`` carries a scheduler choice the library did not
    make (the flag without the library's mark, or a scheduler type)."""
    flags = os.environ.get("XLA_FLAGS", "")
    if SCHEDULER_TYPE_FLAG in flags:
        return True
    return CPU_SCHEDULER_FLAG in flags and os.environ.get(ADDED_MARK) != "1"


def has_batched_lapack(program_text: str) -> bool:
    """Whether a lowered program (StableHLO text) calls LAPACK on a batch:
    the kernel that can wait on XLA:CPU's thread pool while holding it."""
    for line in program_text.splitlines():
        if _LAPACK_CALL.search(line):
            batch = _BATCH_DIMS.search(line)
            if batch is None or int(batch.group(1)) > 0:
                return True
    return False


def scheduler_options(lowered: Any, members: int, devices: int) -> dict[str, Any]:
    """Compile options for one of the library's population programs, with
    ``members`` on each of ``devices`` CPU devices: XLA:CPU's
    concurrency-optimised scheduler, which runs independent kernels on the
    pool's threads at once, where a device has ``CONCURRENT_MIN_MEMBERS`` or
    more members and two or more cores to itself; none if the user chose a
    scheduler, the program is not for CPU or it holds a batched LAPACK call.

    Measured on 2 cores (``docs/performance.md``): one device, 8 to 64
    members, 2-24% faster; 1 to 4 members, up to 16% slower (their kernels
    are too small); one device per core, no faster (the cores are busy).
    """
    import jax

    if members < CONCURRENT_MIN_MEMBERS or cpu_core_count() < 2 * devices:
        return {}
    if scheduler_chosen_by_user() or jax.default_backend() != "cpu":
        return {}
    if has_batched_lapack(lowered.as_text()):
        return {}
    return dict(CONCURRENT_SCHEDULER)


def compile_lowered(
    lowered: Any, members: int, devices: int, options: dict[str, Any] | None = None
) -> Any:
    """``lowered.compile`` with ``scheduler_options`` under ``options``."""
    merged = {**scheduler_options(lowered, members, devices), **(options or {})}
    return lowered.compile(compiler_options=merged or None)


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
    ``ondevice_rl.devices.sharding``) runs one slice per device, in parallel. Call it
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
    wanted = cpu_core_count() if count is None else count
    try:  # JAX refuses a new count once its backend has started
        jax.config.update("jax_num_cpu_devices", wanted)
    except RuntimeError as e:
        if count is None:
            return len(jax.devices("cpu"))
        raise RuntimeError(
            f"cannot switch to {wanted} CPU devices: the JAX backend has already "
            "started; call use_cpu_cores before the first JAX computation"
        ) from e
    return wanted
