"""What ``bench host`` runs: a host simulator, its JAX port, and the learner.

A host env is a gymnasium id (``CartPole-v1``) or an entry string
``package.module:factory`` whose factory returns one gymnasium env. Its JAX
port is the registered env of the same name (our gymnasium-equal ports), or
one named with ``--port HOST=PORT`` (a registered name or an entry string).
The learner is the same for every backend: the shipped recipe for the port
and learner when there is one (``cartpole_ppo`` ...), else the learner's
defaults, with ``num_envs`` (and ``num_steps`` if given) set; an env
without a port gets a stand-in that has only its spaces, so the learner's
network and update are built the same way.
"""

import functools
import importlib
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np

from ondevice_rl import envs
from ondevice_rl.env.spaces import Box, Discrete
from ondevice_rl.env.types import Environment
from ondevice_rl.train.kit.registry import get_algorithm
from ondevice_rl.train.recipes.loader import list_recipes, load_recipe

#: Recipes named ``<prefix>_<algo>`` give the learner's settings on a port.
RECIPE_PREFIX = {
    "CartPole-v1": "cartpole",
    "Acrobot-v1": "acrobot",
    "Pendulum-v1": "pendulum",
    "brax/hopper": "brax_hopper",
}


class HostTarget(NamedTuple):
    """One host env of a ``bench host`` invocation."""

    spec: str  # gymnasium id or ``module:factory``
    port: str | None  # the JAX port's name, None without one
    config: Any  # the learner's frozen config (env: the port, or a stand-in)
    recipe: str | None  # the recipe its settings came from


def make_host_env(spec: str) -> Any:
    """One gymnasium env of ``spec`` (module-level: async workers pickle it)."""
    import gymnasium

    if ":" in spec:
        module, _, factory = spec.partition(":")
        env = getattr(importlib.import_module(module), factory)()
        if not isinstance(env, gymnasium.Env):
            raise ValueError(
                f"{spec} returned {type(env).__name__}, not a gymnasium.Env"
            )
        return env
    return gymnasium.make(spec)


def host_env_factory(spec: str):
    """A picklable ``() -> env`` for gymnasium's vector envs."""
    return functools.partial(make_host_env, spec)


def _space(space: Any, what: str, spec: str) -> Box | Discrete:
    import gymnasium

    if isinstance(space, gymnasium.spaces.Discrete) and int(space.start) == 0:
        return Discrete(int(space.n))
    if isinstance(space, gymnasium.spaces.Box):
        low = np.asarray(space.low, np.float32)
        high = np.asarray(space.high, np.float32)
        return Box(low, high, tuple(space.shape))
    raise ValueError(
        f"{spec}: bench host takes a Box or Discrete(n) {what} space, not {space}"
    )


class _StandInState(NamedTuple):
    time: jnp.ndarray


class _StandInParams(NamedTuple):
    max_steps: int = 1_000_000


class SpacesOnly(Environment):
    """A host env's spaces as a JAX env that never moves (zeros): what a
    learner's network and update are built from when the env has no port."""

    def __init__(self, spec: str, observation: Box, action: Box | Discrete):
        self.name = f"spaces of {spec}"
        self._obs, self._action = observation, action

    def default_params(self):
        return _StandInParams()

    def reset(self, key, params):
        state = _StandInState(jnp.zeros((), jnp.int32))
        return self.observe(state, params), state

    def transition(self, key, state, action, params):
        return state, jnp.float32(0.0), jnp.bool_(False)

    def observe(self, state, params):
        return jnp.zeros(self._obs.shape, jnp.float32)

    def observation_space(self, params):
        return self._obs

    def action_space(self, params):
        return self._action


def _stand_in(spec: str) -> str:
    """Registers ``SpacesOnly`` for ``spec``; returns its registry name."""
    name = "host-spaces/" + spec.replace(":", "/")
    if name not in envs.names():
        env = make_host_env(spec)
        obs = _space(env.observation_space, "observation", spec)
        action = _space(env.action_space, "action", spec)
        env.close()
        envs.register(name, lambda: SpacesOnly(spec, obs, action))
    return name


def _shapes(name: str) -> tuple:
    env, params = envs.make(name)
    obs, action = env.observation_space(params), env.action_space(params)
    kind = (
        ("discrete", action.n)
        if isinstance(action, Discrete)
        else ("box", action.shape)
    )
    return tuple(obs.shape), kind


def host_target(
    spec: str,
    port: str | None,
    algo: str,
    num_envs: int,
    timesteps: int,
    num_steps: int | None = None,
) -> HostTarget:
    """The learner and port for host env ``spec`` (ValueError, one line,
    when the port's spaces differ from the host env's)."""
    if port is None and spec in envs.names():
        port = spec  # our gymnasium-equal port of the same name
    stand_in = _stand_in(spec)
    if port is not None:
        ported, hosted = _shapes(port), _shapes(stand_in)
        if ported != hosted:
            raise ValueError(
                f"--port {spec}={port}: the port's spaces {ported} differ "
                f"from the host env's {hosted}"
            )
    recipe = f"{RECIPE_PREFIX[port]}_{algo}" if port in RECIPE_PREFIX else None
    fields = dict(num_envs=int(num_envs), total_timesteps=int(timesteps))
    if num_steps is not None:
        fields["num_steps"] = int(num_steps)
    if recipe in list_recipes():
        config = load_recipe(recipe).replace(**fields)
    else:
        recipe = None
        config = get_algorithm(algo).config(**fields)
    return HostTarget(spec, port, config.replace(env=port or stand_in), recipe)
