"""Test setup: force the CPU backend, with one device, before JAX starts.

``ondevice_rl`` is imported before ``jax`` so that it can set ``XLA_FLAGS``
(the CPU scheduler flag, see ``ondevice_rl/cpu/flags.py``) first. The device count
is pinned to 1 so that a CLI run in-process (which asks for one CPU device per
core, ``use_cpu_cores``) cannot change it for the tests after it, whatever
the order; multi-device tests run in subprocesses with their own flags.

The whole session shares one JAX compilation cache across the xdist workers
(and the CLI subprocesses the tests start): many tests compile the same
small programs, so a program compiled in one worker is loaded by the next.
A test that sets ``ONDEVICE_RL_CACHE_DIR`` for itself leaves the next test
the suite's cache.
"""

import os

DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"
os.environ["JAX_PLATFORMS"] = "cpu"
if DEVICE_COUNT_FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {DEVICE_COUNT_FLAG}=1"

import signal  # noqa: E402

import pytest  # noqa: E402

import ondevice_rl  # noqa: E402, F401  (sets XLA_FLAGS before jax starts)
from ondevice_rl.train.services.compile_cache import (  # noqa: E402
    CACHE_ENV,
    use_compilation_cache,
)


@pytest.fixture(scope="session")
def suite_cache(tmp_path_factory, worker_id):
    """The session's compilation cache, shared by the xdist workers (their
    base directories sit side by side)."""
    base = tmp_path_factory.getbasetemp()
    path = (base.parent if worker_id != "master" else base) / "jax-cache"
    path.mkdir(exist_ok=True)
    os.environ[CACHE_ENV] = str(path)
    return path


@pytest.fixture(autouse=True)
def _suite_cache_in_use(suite_cache):
    use_compilation_cache(True)  # back on after a test that switched it


@pytest.fixture
def default_sigint():
    """Python's own SIGINT handler for one test: pytest-xdist workers ignore
    SIGINT, and the library only takes Ctrl-C over from the default handler."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
