"""JAX simulators, adapters and the registry: ``env, params = make(name)``."""

import importlib.util
from functools import partial

from ondevice_rl.env.wrappers import MaskObservation
from ondevice_rl.envs.acrobot import Acrobot
from ondevice_rl.envs.brax_adapter import BraxAdapter
from ondevice_rl.envs.cartpole import CartPole
from ondevice_rl.envs.entry import EnvEntryError
from ondevice_rl.envs.gymnax_adapter import GymnaxAdapter
from ondevice_rl.envs.memory_probe import ProbeMemory, ProbeMemoryTruncation
from ondevice_rl.envs.mjx_adapter import DM_CONTROL_SUITE, MjxAdapter
from ondevice_rl.envs.mountain_car import MountainCar
from ondevice_rl.envs.mountain_car_continuous import MountainCarContinuous
from ondevice_rl.envs.pendulum import Pendulum
from ondevice_rl.envs.probes import (
    ProbeBox,
    ProbeMask,
    ProbeOneStep,
    ProbeTruncation,
    ProbeTwoStep,
)
from ondevice_rl.envs.registry import (
    load_plugins,
    make,
    names,
    register,
    register_unavailable,
)
from ondevice_rl.envs.suites import register_suites

register("CartPole-v1", CartPole)
register("Acrobot-v1", Acrobot)
register("MountainCar-v0", MountainCar)
register("MountainCarContinuous-v0", MountainCarContinuous)
register("Pendulum-v1", Pendulum)
register("Probe-OneStep-v0", ProbeOneStep)
register("Probe-TwoStep-v0", ProbeTwoStep)
register("Probe-Truncation-v0", ProbeTruncation)
register("Probe-Box-v0", ProbeBox)
register("Probe-Mask-v0", ProbeMask)
register("Probe-Memory-v0", ProbeMemory)
register("Probe-MemoryTruncation-v0", ProbeMemoryTruncation)
# Partially observed variants: positions and angles only, no velocities.
register(
    "CartPole-NoVel-v1",
    lambda: MaskObservation(CartPole(), (0, 2), "CartPole-NoVel-v1"),
)
register(
    "Pendulum-NoVel-v1",
    lambda: MaskObservation(Pendulum(), (0, 1), "Pendulum-NoVel-v1"),
)

# Adapters: gymnax (a dependency, imported on first make) and brax (optional,
# listed only when installed). Every environment gymnax 1.0.1 registers
# (``gymnax.registered_envs``; tests/test_adapters.py checks this list against
# it) except those in GYMNAX_LEFT_OUT.
GYMNAX_IDS = (
    "CartPole-v1",
    "Acrobot-v1",
    "MountainCar-v0",
    "MountainCarContinuous-v0",
    "Pendulum-v1",
    "Asterix-MinAtar",
    "Breakout-MinAtar",
    "Freeway-MinAtar",
    "Seaquest-MinAtar",
    "SpaceInvaders-MinAtar",
    "Catch-bsuite",
    "DeepSea-bsuite",
    "MemoryChain-bsuite",
    "UmbrellaChain-bsuite",
    "DiscountingChain-bsuite",
    "SimpleBandit-bsuite",
    "FourRooms-misc",
    "MetaMaze-misc",
    "PointRobot-misc",
    "BernoulliBandit-misc",
    "GaussianBandit-misc",
    "Reacher-misc",
    "Swimmer-misc",
    "Pong-misc",
    "FrozenLake-misc",
)
GYMNAX_LEFT_OUT = {
    "MNISTBandit-bsuite": "gymnax downloads MNIST from the internet when it is "
    "constructed (no network on the device; not a simulator)",
}
# Dynamics that ignore the step key (tested): AutoReset may reuse it.
GYMNAX_DETERMINISTIC = (
    "CartPole-v1",
    "MountainCar-v0",
    "MountainCarContinuous-v0",
    "Pendulum-v1",
)
# Observations outside the bounds gymnax declares (a Gaussian reward, -1
# entries; found by check-env): declared unbounded.
GYMNAX_UNBOUNDED_OBS = ("GaussianBandit-misc", "MemoryChain-bsuite")
for _id in GYMNAX_IDS:
    _adapter = partial(
        GymnaxAdapter,
        _id,
        stochastic_step=_id not in GYMNAX_DETERMINISTIC,
        unbounded_obs=_id in GYMNAX_UNBOUNDED_OBS,
    )
    register(f"gymnax/{_id}", _adapter)
for _id, _why in GYMNAX_LEFT_OUT.items():
    register_unavailable(f"gymnax/{_id}", f"left out: {_why}")
BRAX_NAMES = ("ant", "halfcheetah", "hopper", "humanoid", "inverted_pendulum")
if importlib.util.find_spec("brax") is not None:
    for _name in BRAX_NAMES:
        register(f"brax/{_name}", partial(BraxAdapter, _name))
else:
    register_unavailable(
        "brax/", "brax is not installed: pip install 'ondevice_rl[brax]'"
    )
if importlib.util.find_spec("mujoco_playground") is not None:
    for _name in DM_CONTROL_SUITE:
        register(f"mjx/{_name}", partial(MjxAdapter, _name))
else:
    register_unavailable(
        "mjx/",
        "MuJoCo Playground is not installed: pip install 'ondevice_rl[mjx]'",
    )
# Craftax, Navix, XLand-MiniGrid, Jumanji, popgym-arcade, pgx (optional).
register_suites()

__all__ = [
    "Acrobot",
    "BraxAdapter",
    "CartPole",
    "EnvEntryError",
    "GymnaxAdapter",
    "MjxAdapter",
    "MountainCar",
    "MountainCarContinuous",
    "Pendulum",
    "ProbeBox",
    "ProbeMask",
    "ProbeOneStep",
    "ProbeTruncation",
    "ProbeTwoStep",
    "load_plugins",
    "make",
    "names",
    "register",
    "register_unavailable",
]
