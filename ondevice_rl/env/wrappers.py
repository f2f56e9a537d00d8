"""Behaviour layered over one unbatched environment.

Typical stack: ``EpisodeStats(AutoReset(env))``, then ``jax.vmap`` over a batch
of keys/states for a vector of environments::

    env = EpisodeStats(AutoReset(env))
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)    # [B, ...]
    ts = jax.vmap(env.step, in_axes=(0, 0, 0, None))(keys, state, action, params)
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.env.reset_where import reset_where
from ondevice_rl.env.spaces import Box
from ondevice_rl.env.types import Environment, TimeStep


class Wrapper(Environment):
    """Delegates everything to the wrapped environment."""

    def __init__(self, env: Environment):
        self.env = env
        self.name = env.name
        self.stochastic_step = env.stochastic_step
        self.costly_reset = getattr(env, "costly_reset", False)

    def default_params(self) -> Any:
        return self.env.default_params()

    def reset(self, key, params):
        return self.env.reset(key, params)

    def step(self, key, state, action, params) -> TimeStep:
        return self.env.step(key, state, action, params)

    def observation_space(self, params):
        return self.env.observation_space(params)

    def action_space(self, params):
        return self.env.action_space(params)

    @property
    def unwrapped(self) -> Environment:
        return getattr(self.env, "unwrapped", self.env)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.env!r})"


def _computed_once_on_cpu(key: jax.Array) -> jax.Array:
    """``key``, kept in memory on CPU rather than recomputed by each user.

    Threefry on CPU is straight-line element-wise code (``_prng.py``), so
    XLA:CPU fuses the derivation of an environment's key into every kernel
    that reads it, and a reset reads it in many: at 1,024 Navix envs the
    copies cost about a third of the step. A barrier computes it once. Other
    platforms get the plain program (chosen when the program is lowered).
    """
    return jax.lax.platform_dependent(
        key, cpu=jax.lax.optimization_barrier, default=lambda k: k
    )


def _select(pred: jax.Array, on_true: Any, on_false: Any) -> Any:
    return jax.tree.map(lambda a, b: jnp.where(pred, a, b), on_true, on_false)


class AutoReset(Wrapper):
    """Starts a new episode inside ``step`` when one ends.

    The returned ``obs``/``state`` belong to the new episode; ``terminated`` and
    ``truncated`` describe the step just taken, and ``info["final_obs"]`` holds
    the observation reached before the reset, so a learner can bootstrap from
    it on truncation. A reset is computed every step and selected, unless
    the env's ``costly_reset`` says otherwise (``reset_where``).
    """

    def step(self, key, state, action, params) -> TimeStep:
        if self.stochastic_step:
            key, reset_key = jax.random.split(key)
        else:
            # The dynamics ignore the key, so the reset may use it as is: one
            # PRNG split less per environment per step.
            reset_key = key
        reset_key = _computed_once_on_cpu(reset_key)
        ts = self.env.step(key, state, action, params)
        done = jnp.logical_or(ts.terminated, ts.truncated)
        if self.costly_reset:
            obs, state = reset_where(
                self.env.reset, done, reset_key, params, ts.obs, ts.state
            )
        else:
            reset_obs, reset_state = self.env.reset(reset_key, params)
            obs = _select(done, reset_obs, ts.obs)
            state = _select(done, reset_state, ts.state)
        return ts._replace(obs=obs, state=state, info={**ts.info, "final_obs": ts.obs})


class EpisodeStatsState(NamedTuple):
    env_state: Any
    episode_return: jax.Array  # [] float32, running return of this episode
    episode_length: jax.Array  # [] int32, running length of this episode


class EpisodeStats(Wrapper):
    """Tracks the running return and length of each episode.

    ``info["episode_return"]`` / ``info["episode_length"]`` hold the totals of
    the episode that ended at this step and are only meaningful where
    ``info["episode_done"]`` is True. Wrap an ``AutoReset`` env (or read the
    values before resetting yourself).
    """

    def reset(self, key, params):
        obs, env_state = self.env.reset(key, params)
        return obs, EpisodeStatsState(env_state, jnp.float32(0.0), jnp.int32(0))

    def step(self, key, state, action, params) -> TimeStep:
        ts = self.env.step(key, state.env_state, action, params)
        done = jnp.logical_or(ts.terminated, ts.truncated)
        ep_return = state.episode_return + ts.reward
        ep_length = state.episode_length + 1
        new_state = EpisodeStatsState(
            env_state=ts.state,
            episode_return=jnp.where(done, 0.0, ep_return),
            episode_length=jnp.where(done, 0, ep_length),
        )
        info = {
            **ts.info,
            "episode_done": done,
            "episode_return": ep_return,
            "episode_length": ep_length,
        }
        return ts._replace(state=new_state, info=info)


class ObservationView(Wrapper):
    """The same task seen through ``view(obs)``: a partially observed version,
    or the same information laid out for a network. Subclasses define
    ``view`` (one unbatched observation) and ``observation_space``.

    It changes what the task shows, not the episode handling, so it is its
    own ``unwrapped`` env: evaluation strips the wrappers above it only.
    """

    def view(self, obs: Any) -> Any:
        raise NotImplementedError

    def reset(self, key, params):
        obs, state = self.env.reset(key, params)
        return self.view(obs), state

    def step(self, key, state, action, params) -> TimeStep:
        ts = self.env.step(key, state, action, params)
        return ts._replace(obs=self.view(ts.obs))

    def observe(self, state, params):
        return self.view(self.env.observe(state, params))

    @property
    def unwrapped(self) -> Environment:
        return self


class MaskObservation(ObservationView):
    """Keeps only the entries ``keep`` of a vector observation: a partially
    observed version of a task (CartPole without its velocities, say)."""

    def __init__(self, env: Environment, keep: tuple[int, ...], name: str):
        super().__init__(env)
        self.keep = np.asarray(keep, np.int32)
        self.name = name

    def view(self, obs: jax.Array) -> jax.Array:
        return obs[self.keep]

    def observation_space(self, params):
        space = self.env.observation_space(params)
        low = np.broadcast_to(np.asarray(space.low), space.shape)[self.keep]
        high = np.broadcast_to(np.asarray(space.high), space.shape)[self.keep]
        return Box(low, high, (len(self.keep),), space.dtype)
