"""The machine a measurement ran on, as records and figure titles state it."""

import datetime
import os
import platform
from pathlib import Path

import jax


def processor() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo), else what platform says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict:
    """Date, jax version, backend, device kind and count, CPU cores and model."""
    return dict(
        date=datetime.datetime.now().isoformat(timespec="seconds"),
        jax=jax.__version__,
        backend=jax.default_backend(),
        device=jax.devices()[0].device_kind,
        devices=jax.device_count(),
        cpu_count=os.cpu_count(),
        processor=processor(),
    )


def label(meta: dict) -> str:
    """``"<device> x N, <cores> cores of <CPU>, jax <version>, <date>"``."""
    return (
        f"{meta['device']} x {meta['devices']}, {meta['cpu_count']} cores of "
        f"{meta['processor']}, jax {meta['jax']}, {meta['date'][:10]}"
    )
