"""ondevice_rl: reinforcement learning that runs entirely on the accelerator.

Importing this package sets the XLA CPU flag that avoids a deadlock in
jaxlib's CPU runtime and lowers Threefry without a loop on CPU (see README,
"CPU notes"); import it before running JAX computations.
"""

from ondevice_rl._xla import ensure_cpu_scheduler_flag, use_cpu_cores

ensure_cpu_scheduler_flag()

from ondevice_rl._prng import use_straight_line_threefry_on_cpu  # noqa: E402

STRAIGHT_LINE_THREEFRY = use_straight_line_threefry_on_cpu()

from ondevice_rl import envs  # noqa: E402  (envs builds on the core above)
from ondevice_rl.envs import make  # noqa: E402
from ondevice_rl.spaces import Box, Discrete  # noqa: E402
from ondevice_rl.types import Environment, TimeStep  # noqa: E402
from ondevice_rl.wrappers import AutoReset, EpisodeStats, Wrapper  # noqa: E402

__all__ = [
    "AutoReset",
    "Box",
    "Discrete",
    "Environment",
    "EpisodeStats",
    "TimeStep",
    "Wrapper",
    "envs",
    "make",
    "use_cpu_cores",
]
__version__ = "0.1.0"
