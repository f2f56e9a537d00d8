"""Navix (MiniGrid in JAX) behind our protocol. Install with
``pip install 'ondevice_rl[navix]'``.

    env, params = ondevice_rl.make("navix/Navix-Empty-8x8-v0")  # obs [8, 8, 3] uint8

Navix keeps everything in a ``Timestep`` (state, step count, last
observation) and its ``step(timestep, action)`` starts a new episode by
itself, with a ``lax.cond`` on the previous step type. The step here is
Navix's ``_step``, the transition alone, so our ``AutoReset`` computes the
only reset, ``env.reset(key)`` from a fresh key.

Navix's step type says ``TERMINATION`` (goal, lava, ...) or ``TRUNCATION``
(its time limit, ``t >= max_steps``; a termination on the last step hides
it). The environment is built with its time limit out of reach, so
``terminated`` is ``step_type == TERMINATION`` alone and the truncation is
ours, at ``params.max_steps`` (default Navix's own default, 100 steps).
Navix draws its randomness (dynamic obstacles) from a key in its state, so
``step`` ignores its key.

Navix's reset also renders the grid's background into a "rendering cache"
kept in the state (≈12 kB per 8×8 env), read only by its RGB observations;
its own auto-reset passes the previous episode's cache on. With symbolic
observations the adapter gives reset a one-tile placeholder instead: no
rendering per reset, no background in the state. RGB observations render it
at every reset (so a new layout gets its own background).

Observations keep Navix's ``uint8`` and are declared categorical: the
symbolic grids ``[H, W, 3]`` hold (object id ≤ 10, colour ≤ 5, state ≤ 3: a
door's open/closed/locked or the agent's direction) per cell. In
KeyCorridor the state channel also shows 254 (Navix's door state
``closed * (1 + locked)`` wraps around in ``uint8``), so there it is
declared up to 255. ``observation="rgb"`` (or ``"rgb_first_person"``,
``"symbolic_first_person"``) picks another of Navix's observation
functions; RGB frames are ``uint8`` pixels.
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.env.spaces import Box, Discrete
from ondevice_rl.envs.suite_adapter import (
    NO_LIMIT,
    SuiteAdapter,
    import_suite,
    without_observation,
)

#: Navix's registered environments (``navix.registry()`` in navix 0.7; a
#: test checks the two agree), listed so that the registry imports nothing.
NAVIX_IDS = (
    "Navix-DistShift1-v0",
    "Navix-DistShift2-v0",
    "Navix-DoorKey-16x16-v0",
    "Navix-DoorKey-5x5-v0",
    "Navix-DoorKey-6x6-v0",
    "Navix-DoorKey-8x8-v0",
    "Navix-DoorKey-Random-16x16-v0",
    "Navix-DoorKey-Random-5x5-v0",
    "Navix-DoorKey-Random-6x6-v0",
    "Navix-DoorKey-Random-8x8-v0",
    "Navix-Dynamic-Obstacles-16x16-v0",
    "Navix-Dynamic-Obstacles-5x5-Random-v0",
    "Navix-Dynamic-Obstacles-5x5-v0",
    "Navix-Dynamic-Obstacles-6x6-Random-v0",
    "Navix-Dynamic-Obstacles-6x6-v0",
    "Navix-Dynamic-Obstacles-8x8-v0",
    "Navix-Empty-16x16-v0",
    "Navix-Empty-5x5-v0",
    "Navix-Empty-6x6-v0",
    "Navix-Empty-8x8-v0",
    "Navix-Empty-Random-16x16-v0",
    "Navix-Empty-Random-5x5-v0",
    "Navix-Empty-Random-6x6-v0",
    "Navix-Empty-Random-8x8-v0",
    "Navix-FourRooms-v0",
    "Navix-GoToDoor-5x5-v0",
    "Navix-GoToDoor-6x6-v0",
    "Navix-GoToDoor-8x8-v0",
    "Navix-KeyCorridorS3R1-v0",
    "Navix-KeyCorridorS3R2-v0",
    "Navix-KeyCorridorS3R3-v0",
    "Navix-KeyCorridorS4R3-v0",
    "Navix-KeyCorridorS5R3-v0",
    "Navix-KeyCorridorS6R3-v0",
    "Navix-LavaGapS5-v0",
    "Navix-LavaGapS6-v0",
    "Navix-LavaGapS7-v0",
    "Navix-SimpleCrossingS11N5-v0",
    "Navix-SimpleCrossingS9N1-v0",
    "Navix-SimpleCrossingS9N2-v0",
    "Navix-SimpleCrossingS9N3-v0",
)
#: ``navix.make``'s default time limit.
NAVIX_MAX_STEPS = 100
OBSERVATIONS = ("symbolic", "symbolic_first_person", "rgb", "rgb_first_person")
#: Largest (object id, colour, state) of a symbolic cell.
SYMBOLIC_HIGH = (10, 5, 3)


class NavixState(NamedTuple):
    navix_timestep: Any  # navix.Timestep: its state and step count
    time: jax.Array  # [] int32


class NavixAdapter(SuiteAdapter):
    """Wraps ``navix.make(navix_id, observation_fn=...)`` without its time
    limit; ``max_steps`` (default 100) is ours."""

    state_type = NavixState
    stochastic_step = False

    def __init__(
        self,
        navix_id: str,
        max_steps: int = NAVIX_MAX_STEPS,
        observation: str = "symbolic",
        **kwargs: Any,
    ):
        nx = import_suite("navix", "navix", "navix")
        if observation not in OBSERVATIONS:
            raise ValueError(
                f"observation {observation!r} is not one of {', '.join(OBSERVATIONS)}"
            )
        self.name = f"navix/{navix_id}"
        self._observation = observation
        self._max_steps = int(max_steps)
        self._termination = nx.environments.environment.StepType.TERMINATION
        self.navix_env = nx.make(
            navix_id,
            max_steps=NO_LIMIT,
            observation_fn=getattr(nx.observations, observation),
            **kwargs,
        )
        self._cache = None  # RGB: Navix renders the background at each reset
        if not observation.startswith("rgb"):
            tile = nx.rendering.cache.TILE_SIZE
            patches = jnp.zeros((1, tile, tile, 3), jnp.uint8)
            self._cache = nx.rendering.cache.RenderingCache(patches=patches)

    def _reset(self, key, params):
        timestep = self.navix_env.reset(key, self._cache)
        return timestep.observation, without_observation(timestep)

    def _step(self, key, inner, action, params):
        timestep = self.navix_env._step(inner, action)
        terminated = timestep.step_type == self._termination
        obs = timestep.observation
        return obs, without_observation(timestep), timestep.reward, terminated

    def observation_space(self, params):
        shape = tuple(int(n) for n in self.navix_env.observation_space.shape)
        if self._observation.startswith("rgb"):
            return Box(0, 255, shape, jnp.uint8)
        high = np.array(SYMBOLIC_HIGH, np.uint8)
        if "KeyCorridor" in self.name:
            high[2] = 255
        return Box(0, high, shape, jnp.uint8, categorical=True)

    def action_space(self, params):
        return Discrete(len(self.navix_env.action_set))
