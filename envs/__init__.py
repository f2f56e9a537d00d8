"""JAX simulators, adapters and the registry: ``env, params = make(name)``."""

from ondevice_rl.envs.cartpole import CartPole
from ondevice_rl.envs.registry import make, names, register

register("CartPole-v1", CartPole)

__all__ = ["CartPole", "make", "names", "register"]
