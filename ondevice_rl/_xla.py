"""XLA flags that must be in place before the JAX backend starts.

jaxlib 0.10.2's CPU runtime deadlocks at random when one compiled program is
executed several times in a process, unless the concurrency-optimised
scheduler is off. We add that flag unless the user already chose a value.
"""

import os

CPU_SCHEDULER_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler"


def ensure_cpu_scheduler_flag() -> None:
    """Append the scheduler flag to ``XLA_FLAGS`` unless the user set it."""
    flags = os.environ.get("XLA_FLAGS", "")
    if CPU_SCHEDULER_FLAG not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {CPU_SCHEDULER_FLAG}=false".strip()
