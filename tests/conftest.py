"""Test setup: force the CPU backend, with one device, before JAX starts.

``ondevice_rl`` is imported before ``jax`` so that it can set ``XLA_FLAGS``
(the CPU scheduler flag, see ``ondevice_rl/_xla.py``) first. The device count
is pinned to 1 so that a CLI run in-process (which asks for one CPU device per
core, ``use_cpu_cores``) cannot change it for the tests after it, whatever
the order; multi-device tests run in subprocesses with their own flags.
"""

import os

DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"
os.environ["JAX_PLATFORMS"] = "cpu"
if DEVICE_COUNT_FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {DEVICE_COUNT_FLAG}=1"

import signal  # noqa: E402

import pytest  # noqa: E402

import ondevice_rl  # noqa: E402, F401  (sets XLA_FLAGS before jax starts)


@pytest.fixture
def default_sigint():
    """Python's own SIGINT handler for one test: pytest-xdist workers ignore
    SIGINT, and the library only takes Ctrl-C over from the default handler."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
