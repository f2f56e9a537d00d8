"""What the adapters of JAX suites (Craftax, Navix, XLand-MiniGrid, Jumanji,
popgym-arcade, pgx) share.

Each suite steps without its own auto-reset here (``AutoReset`` computes the
only reset, from a fresh key), and each reports one end-of-episode signal
that mixes the time limit with real terminations, or none at all. A
``SuiteAdapter`` subclass gives ``_reset(key, params) -> (obs, inner)`` and
``_step(key, inner, action, params) -> (obs, inner, reward, terminated)``
with ``terminated`` free of any time limit (how, per suite, is in each
module); this class counts the steps and truncates at ``params.max_steps``,
so truncation is ours and exact at the limit:

    truncated = time >= params.max_steps

The suite's own state sits in ``state[0]`` beside our int32 ``time``; its
field name (``craftax_state``, ``navix_timestep``, …) is part of the paths a
checkpoint stores, so each adapter has its own state NamedTuple.

A suite that is not installed is registered as unavailable with a one-line
reason (``envs/suites.py``); ``import_suite`` gives the same line to code
that builds an adapter directly.
"""

import importlib
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.env.types import Environment, TimeStep
from ondevice_rl.envs.gymnax_adapter import narrow_64_bit

#: A suite's own time limit, disabled (step counts never reach it).
NO_LIMIT = 2**31 - 1


class TimeLimit(NamedTuple):
    """Params of a suite whose own parameters are static (fixed at ``make``)."""

    max_steps: jax.Array  # [] int32


def without_observation(timestep: Any) -> Any:
    """A suite's timestep (a flax struct) with an empty observation, for the
    state: the suite's step computes the next observation from the state,
    and ours is carried beside it; kept in the state too, every auto-reset
    would select each observation twice."""
    return timestep.replace(observation=jnp.zeros((0,), timestep.observation.dtype))


def missing_suite_reason(distribution: str, extra: str, how: str = "") -> str:
    """The one line for a suite that is not installed."""
    how = how or f"pip install 'ondevice_rl[{extra}]'"
    return f"{distribution} is not installed: {how}"


def import_suite(module: str, distribution: str, extra: str, how: str = "") -> Any:
    """``importlib.import_module(module)``, or an ImportError whose message is
    ``missing_suite_reason``'s line."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(missing_suite_reason(distribution, extra, how)) from e


class SuiteAdapter(Environment):
    """Our step counter and truncation around a suite's non-resetting step.

    Subclasses set ``name``, ``state_type`` (a NamedTuple ``(suite state,
    time)``), ``stochastic_step`` (whether ``_step`` uses its key) and
    ``_max_steps`` (the default time limit), and implement ``_reset``,
    ``_step`` and the spaces. ``params`` are ``TimeLimit`` unless the
    subclass has traced suite parameters of its own (then a NamedTuple
    ending in ``max_steps``).
    """

    state_type: type
    _max_steps: int

    def default_params(self) -> Any:
        return TimeLimit(jnp.int32(self._max_steps))

    def _reset(self, key: jax.Array, params: Any) -> tuple[Any, Any]:
        raise NotImplementedError

    def _step(
        self, key: jax.Array, inner: Any, action: jax.Array, params: Any
    ) -> tuple[Any, Any, jax.Array, jax.Array]:
        raise NotImplementedError

    def reset(self, key, params):
        obs, inner = self._reset(key, params)
        return obs, self.state_type(narrow_64_bit(inner), jnp.int32(0))

    def step(self, key, state, action, params) -> TimeStep:
        obs, inner, reward, terminated = self._step(key, state[0], action, params)
        time = state.time + 1
        return TimeStep(
            obs=obs,
            state=self.state_type(narrow_64_bit(inner), time),
            reward=jnp.asarray(reward, jnp.float32),
            terminated=jnp.asarray(terminated, jnp.bool_),
            truncated=time >= params.max_steps,
            info={},
        )
