"""JAX simulators, adapters and the registry: ``env, params = make(name)``."""

from ondevice_rl.envs.acrobot import Acrobot
from ondevice_rl.envs.cartpole import CartPole
from ondevice_rl.envs.mountain_car import MountainCar
from ondevice_rl.envs.mountain_car_continuous import MountainCarContinuous
from ondevice_rl.envs.pendulum import Pendulum
from ondevice_rl.envs.probes import ProbeOneStep, ProbeTruncation, ProbeTwoStep
from ondevice_rl.envs.registry import make, names, register

register("CartPole-v1", CartPole)
register("Acrobot-v1", Acrobot)
register("MountainCar-v0", MountainCar)
register("MountainCarContinuous-v0", MountainCarContinuous)
register("Pendulum-v1", Pendulum)
register("Probe-OneStep-v0", ProbeOneStep)
register("Probe-TwoStep-v0", ProbeTwoStep)
register("Probe-Truncation-v0", ProbeTruncation)

__all__ = [
    "Acrobot",
    "CartPole",
    "MountainCar",
    "MountainCarContinuous",
    "Pendulum",
    "ProbeOneStep",
    "ProbeTruncation",
    "ProbeTwoStep",
    "make",
    "names",
    "register",
]
