"""ondevice_rl: reinforcement learning that runs entirely on the accelerator.

Importing this package first applies the process-wide XLA:CPU settings
(``ondevice_rl.cpu.configure_process``: the scheduler flag that guards
against a deadlock in jaxlib's CPU runtime, and Threefry lowered without a
loop on CPU; see the docs' CPU notes, ``docs/cpu-notes.md``); import it
before running JAX computations.

``run_training(env=..., algo=..., ...)`` (``ondevice-rl train`` as a call),
``load_policy(run_dir)`` (a trained run's policy) and
``export_policy(run_dir, out)`` (that policy as a ``jax.export`` artifact)
come from ``ondevice_rl.train``, imported on first use only: the core never
imports ``ondevice_rl.train``.
"""

from ondevice_rl import cpu

# First thing: JAX reads XLA_FLAGS once, when its CPU backend starts.
cpu.configure_process()

from ondevice_rl import envs  # noqa: E402  (envs builds on the core above)
from ondevice_rl.cpu.flags import use_cpu_cores  # noqa: E402
from ondevice_rl.env.spaces import Box, Discrete  # noqa: E402
from ondevice_rl.env.types import Environment, TimeStep  # noqa: E402
from ondevice_rl.env.wrappers import AutoReset, EpisodeStats, Wrapper  # noqa: E402
from ondevice_rl.envs import make  # noqa: E402

__all__ = [
    "AutoReset",
    "Box",
    "Discrete",
    "Environment",
    "EpisodeStats",
    "TimeStep",
    "Wrapper",
    "envs",
    "export_policy",
    "load_policy",
    "make",
    "run_training",
    "use_cpu_cores",
]
__version__ = "0.1.0"

_LAZY = {
    "export_policy": "ondevice_rl.train.use.export",
    "load_policy": "ondevice_rl.train.use.policy",
    "run_training": "ondevice_rl.train.run.entry",
}


def __getattr__(name: str):
    """``load_policy``, ``export_policy`` and ``run_training``, imported
    from ``ondevice_rl.train`` on first use."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
