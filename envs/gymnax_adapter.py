"""Any gymnax environment behind our protocol (no auto-reset inside ``step``).

``step`` calls gymnax's ``step_env`` (the dynamics alone; gymnax's ``step``
would reset by itself) and adds our time limit: ``truncated = time >=
max_steps``, ``max_steps`` defaulting to gymnax's ``max_steps_in_episode``.
``terminated`` is gymnax's ``done`` without the time limit (gymnax ≥ 1.0's
``done`` already excludes it; older versions included it).

Observations are float32 whatever gymnax's dtype (MinAtar's ``[10, 10, C]``
channels, bsuite's grids, FourRooms' int coordinates) and the observation
space a float32 ``Box`` of the same shape; a ``Discrete(n)`` observation
(FrozenLake's cell index) becomes its one-hot ``[n]`` vector.

    env, params = ondevice_rl.make("gymnax/CartPole-v1")
    env, params = ondevice_rl.make("gymnax/Breakout-MinAtar")  # obs [10, 10, 4]

Any gymnax-style environment object (``reset_env``/``step_env``, spaces, a
``time`` in its state, ``max_steps_in_episode`` in its params) is adapted the
same way: ``GymnaxAdapter(my_env, my_params)``. ``is_gymnax_style`` tells
such objects apart (``make`` of a ``"package.module:factory"`` string uses it
on what the factory returns).
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.env.spaces import Box, Discrete
from ondevice_rl.env.types import Environment, TimeStep


class GymnaxParams(NamedTuple):
    env_params: Any  # gymnax's own params pytree
    max_steps: jax.Array  # [] int32, our time limit


class GymnaxAdapter(Environment):
    """Wraps a gymnax environment; state is gymnax's state (has ``time``).

    ``gymnax_env`` is a gymnax id (``gymnax.make(gymnax_env, **kwargs)``) or
    a gymnax-style environment object; ``gymnax_params`` its params (default:
    its ``default_params``). ``stochastic_step=False`` promises that gymnax's
    ``step_env`` ignores its key (true of CartPole, MountainCar(Continuous)
    and Pendulum), so ``AutoReset`` may reuse it for the reset: one PRNG
    split less per env per step, the dominant cost of stepping these envs in
    a batch. ``unbounded_obs=True`` declares the observations unbounded,
    for envs whose observations leave the bounds gymnax declares.

    Raises:
        ValueError: one line, when an object is not gymnax-style or its
            params have no time limit (``max_steps_in_episode``).
    """

    def __init__(
        self,
        gymnax_env: str | Any,
        gymnax_params: Any = None,
        *,
        name: str | None = None,
        stochastic_step: bool = True,
        unbounded_obs: bool = False,
        **kwargs,
    ):
        self.stochastic_step = stochastic_step
        self._unbounded_obs = unbounded_obs
        if isinstance(gymnax_env, str):
            # lazy: gymnax pulls in scipy, pandas, matplotlib (3 s; ondevice_rl: 1 s)
            import gymnax

            self.name = name or f"gymnax/{gymnax_env}"
            gymnax_env, defaults = gymnax.make(gymnax_env, **kwargs)
        else:
            self.name = name or type(gymnax_env).__name__
            missing = gymnax_style_missing(gymnax_env)
            if missing:
                raise ValueError(f"{self.name} is not gymnax-style: no {missing}")
            defaults = getattr(gymnax_env, "default_params", None)
        self.gymnax_env = gymnax_env
        self._gymnax_params = defaults if gymnax_params is None else gymnax_params
        if not hasattr(self._gymnax_params, "max_steps_in_episode"):
            raise ValueError(
                f"{self.name}'s params ({type(self._gymnax_params).__name__}) have "
                "no max_steps_in_episode, the time limit"
            )
        # gymnax >= 1.0 reports time limits apart (``is_truncated``).
        self._done_has_time_limit = not hasattr(self.gymnax_env, "is_truncated")
        space = self.gymnax_env.observation_space(self._gymnax_params)
        self._one_hot = int(space.n) if hasattr(space, "n") else 0
        self._time_dtype = self._gymnax_time_dtype()

    def _gymnax_time_dtype(self) -> Any:
        """The dtype of gymnax's own ``state.time`` (MetaMaze counts in
        floats); ours is int32 and goes back to it for gymnax's code."""
        try:
            reset = self.gymnax_env.reset_env
            state = jax.eval_shape(reset, jax.random.key(0), self._gymnax_params)[1]
            return jnp.dtype(state.time.dtype)
        except Exception:  # reset itself fails: the env checks say why
            return jnp.dtype(jnp.int32)

    def default_params(self) -> GymnaxParams:
        limit = self._gymnax_params.max_steps_in_episode
        return GymnaxParams(self._gymnax_params, jnp.int32(limit))

    def reset(self, key, params):
        obs, state = self.gymnax_env.reset_env(key, params.env_params)
        return self._obs(obs), _with_time(narrow_64_bit(state), jnp.int32)

    def step(self, key, state, action, params) -> TimeStep:
        obs, state, reward, done, _ = self.gymnax_env.step_env(
            key, _with_time(state, self._time_dtype), action, params.env_params
        )
        state = _with_time(narrow_64_bit(state), jnp.int32)
        done = jnp.asarray(done, jnp.bool_)
        if self._done_has_time_limit:
            done = done & (state.time < params.env_params.max_steps_in_episode)
        return TimeStep(
            obs=self._obs(obs),
            state=state,
            reward=jnp.asarray(reward, jnp.float32),
            terminated=done,
            truncated=state.time >= params.max_steps,
            info={},
        )

    def _obs(self, obs) -> jax.Array:
        if self._one_hot:
            return jax.nn.one_hot(obs, self._one_hot, dtype=jnp.float32)
        return jnp.asarray(obs, jnp.float32)

    def observation_space(self, params):
        if self._one_hot:
            return Box(0.0, 1.0, (self._one_hot,), jnp.float32)
        space = _space(self.gymnax_env.observation_space(params.env_params))
        if self._unbounded_obs:
            return Box(-jnp.inf, jnp.inf, space.shape, jnp.float32)
        return space

    def action_space(self, params):
        return _space(self.gymnax_env.action_space(params.env_params))


#: What gymnax-style code computes in under ``jax_enable_x64`` → our dtypes.
_NARROW = {jnp.dtype(jnp.float64): jnp.float32, jnp.dtype(jnp.int64): jnp.int32}


def narrow_64_bit(tree: Any) -> Any:
    """Python/weakly-typed scalars (gymnax's ``time=0``) → fixed-dtype arrays,
    so ``lax.scan`` carries keep one type; 64-bit leaves (default dtypes
    under ``jax_enable_x64``) → 32-bit. PRNG keys stay as they are."""

    def strong(x):
        if jax.dtypes.issubdtype(getattr(x, "dtype", None), jax.dtypes.prng_key):
            return x
        dtype = jnp.result_type(x)
        return jnp.asarray(x, _NARROW.get(jnp.dtype(dtype), dtype))

    return jax.tree.map(strong, tree)


def _with_time(state: Any, dtype: Any) -> Any:
    """``state`` with its ``time`` cast to ``dtype`` (unchanged if it has none)."""
    time = getattr(state, "time", None)
    if time is None or jnp.result_type(time) == jnp.dtype(dtype):
        return state
    replace = getattr(state, "replace", None) or state._replace
    return replace(time=jnp.asarray(time, dtype))


#: What an object needs to be adapted as a gymnax environment.
GYMNAX_METHODS = ("reset_env", "step_env", "observation_space", "action_space")


def gymnax_style_missing(obj: Any) -> str:
    """The gymnax methods ``obj`` lacks, comma-separated ("" if none)."""
    return ", ".join(m for m in GYMNAX_METHODS if not callable(getattr(obj, m, None)))


def is_gymnax_style(obj: Any) -> bool:
    """Whether ``obj`` looks like a gymnax environment (``reset_env``,
    ``step_env`` and its spaces), not one following our protocol."""
    if isinstance(obj, (type, Environment)):  # a class is a factory
        return False
    return not gymnax_style_missing(obj)


def _space(space: Any) -> Discrete | Box:
    if hasattr(space, "n"):
        return Discrete(int(space.n))
    low = jnp.asarray(space.low, jnp.float32)
    high = jnp.asarray(space.high, jnp.float32)
    return Box(low, high, tuple(space.shape), jnp.float32)
