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
the suite's cache. (JAX caches programs that took 1 s or more to compile;
caching every program, ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0``,
measured 6% faster on the learners' modules in one process but 3-7% slower
on the docs, resume and memory modules on two workers: left at 1 s.)

``make test`` runs ``--dist loadgroup``: modules whose tests share
module-scoped programs carry an ``xdist_group`` mark, so that one worker
builds them once. pytest 9.2 with pytest-xdist 3.8 drops the marks
silently (pytest-dev/pytest-xdist#1386: the group is written into a node id
that pytest 9.2 no longer reads), which builds those programs on both
workers; the test extra pins pytest below 9.2, and that version pair (or a
worker whose groups were lost) stops the session instead of running on.
"""

import os

DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"
os.environ["JAX_PLATFORMS"] = "cpu"
if DEVICE_COUNT_FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {DEVICE_COUNT_FLAG}=1"

import atexit  # noqa: E402
import gc  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
from importlib.metadata import version  # noqa: E402

import pytest  # noqa: E402
from packaging.version import Version  # noqa: E402  (pytest's own dependency)

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


#: pytest and pytest-xdist versions whose --dist loadgroup does not group.
_UNGROUPED = ((9, 2), (3, 8))


def _loadgroup_message(what: str) -> str:
    return (
        f"--dist loadgroup {what}: pytest {pytest.__version__} with pytest-xdist "
        f"{version('pytest-xdist')} does not group (pytest-dev/pytest-xdist#1386); "
        "pip install 'pytest<9.2'"
    )


def _release(name: str) -> tuple[int, ...]:
    return Version(version(name)).release[:2]


def pytest_configure(config):
    """Under ``--dist loadgroup``, a known version pair that drops the groups
    stops the session in one line, before the workers start."""
    if config.getoption("dist", "no") == "loadgroup" and (
        _release("pytest") >= _UNGROUPED[0]
        and _release("pytest-xdist") <= _UNGROUPED[1]
    ):
        raise pytest.UsageError(_loadgroup_message("would split the groups"))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """In an xdist worker under ``--dist loadgroup``: every grouped test's
    node id carries its group, or the session stops (a version pair not
    known above)."""
    if not getattr(config.option, "loadgroup", False):
        return
    lost = [
        item.nodeid
        for item in items
        if item.get_closest_marker("xdist_group") and "@" not in item.nodeid
    ]
    if lost:
        raise pytest.UsageError(_loadgroup_message(f"lost the group of {lost[0]}"))


def _freeze_survivors():
    """Collect the garbage, then move every object left into the collector's
    permanent generation, which its collections no longer walk.

    What a worker keeps alive grows to about a million objects, most of them
    JAX's tracing caches (jaxprs, their variables, source info), and each of
    Python's full collections walks them all: 37 full collections per worker
    took 20-22 s of a 337 s suite, the one at the session's end 1.8 s. Frozen
    after the imports and after each test file (its module fixtures torn
    down), the collector walks only what the files after it made. Garbage
    that a frozen object becomes later (an evicted cache entry in a cycle)
    is kept: small beside the caches themselves."""
    gc.collect()
    gc.freeze()


def pytest_collection_finish(session):
    # Tracing allocates millions of objects that die young: with Python's
    # threshold (700 allocations) a worker ran ~13k young collections and
    # dozens of full ones inside each long file; this threshold measured half
    # the collector's time on three learner modules.
    gc.set_threshold(20_000, 20, 10)
    _freeze_survivors()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    yield
    if nextitem is None or nextitem.path != item.path:
        _freeze_survivors()


def _exit_now():
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def pytest_unconfigure(config):
    """An xdist worker, its reports sent and pytest's own clean-up done,
    leaves without JAX's exit clean-up: freeing every cached program and
    trace one by one took a worker 2-3 s, for memory the process gives back
    as it ends (the controller waits for both workers to end). Registered
    last, this exit handler runs first and skips the others."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        atexit.register(_exit_now)
