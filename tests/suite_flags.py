"""The default suite's compile-speed flags, for tests that start processes
with XLA flags of their own (not collected: not test_*.py).

``make test`` compiles with XLA's backend optimisation off and XLA:CPU's
older elemental emitters instead of its fusion emitters: the suite's
programs are tiny, so compiling dominates, and together the two flags more
than halve a compile (the fusion emitters alone: about 40% of a tiny PPO
program's compile on 2 cores). Results under them are exact and
deterministic, but their float32 rounding differs from the default
compiler's, so bitwise pins keep one set per flag profile
(``test_golden.py``).
"""

import contextlib
import os

#: The Makefile's TEST_XLA_FLAGS.
SUITE_XLA_FLAGS = (
    "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"
)
SUITE_FLAGS = tuple(f.split("=")[0] for f in SUITE_XLA_FLAGS.split())


def suite_compile_flags() -> str:
    """Those of the suite's flags that are set in this process's XLA_FLAGS,
    to be kept by a subprocess that sets its own flags."""
    flags = os.environ.get("XLA_FLAGS", "").split()
    return " ".join(f for f in flags if f.startswith(SUITE_FLAGS))


#: XLA:CPU's own emitters, for a test of bitwise equality between programs
#: of different shapes (segmented and one-shot runs, with and without
#: evaluation): the elemental emitters round such programs' shared ops
#: differently, while the fusion emitters, which every user's compile has,
#: keep them bit-identical.
PRODUCT_EMITTERS = {"xla_cpu_use_fusion_emitters": True}


@contextlib.contextmanager
def _program_options(options: dict | None):
    """Programs compiled through the program cache inside use ``options``."""
    from ondevice_rl.train.services.programs import PROGRAMS

    saved = PROGRAMS.compiler_options
    PROGRAMS.compiler_options = options
    try:
        yield
    finally:
        PROGRAMS.compiler_options = saved


@contextlib.contextmanager
def product_emitters():
    """Programs compiled through the program cache inside use
    ``PRODUCT_EMITTERS`` on top of the cache's options when entered (inside
    ``fast_compiles``, on top of ``FAST``)."""
    from ondevice_rl.train.services.programs import PROGRAMS

    with _program_options({**(PROGRAMS.compiler_options or {}), **PRODUCT_EMITTERS}):
        yield


#: XLA's backend optimisation off for programs compiled through a program
#: cache (the suite's XLA_FLAGS set it for every other compile).
FAST = {"xla_backend_optimization_level": 0}

#: XLA's backend optimisation on, for the few programs that run long enough
#: for it to pay (a probe's thousands of gradient steps, several seeds of a
#: learning check): a few seconds more compile, several times faster runs.
OPTIMISED = {"xla_backend_optimization_level": 2}


def fast_compiles():
    """Programs compiled through the program cache inside use ``FAST``."""
    return _program_options(FAST)


@contextlib.contextmanager
def cached_even_if_quick():
    """Programs compiled inside go to the suite's persistent compile cache
    (tests/conftest.py) however quickly they compiled (JAX keeps only those
    over a second), where a test's subprocesses find them."""
    import jax

    from ondevice_rl.train.services.compile_cache import use_compilation_cache

    use_compilation_cache(True)
    key = "jax_persistent_cache_min_compile_time_secs"
    saved = getattr(jax.config, key)
    jax.config.update(key, 0)
    try:
        yield
    finally:
        jax.config.update(key, saved)
