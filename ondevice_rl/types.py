"""The environment protocol shared by every simulator and wrapper.

An environment is a set of pure functions of explicit ``(key, state, action,
params)``; ``params`` is a pytree of traced physics constants plus the time
limit ``max_steps``, so populations can vmap over it. One instance is one
unbatched environment: batch with ``jax.vmap``.
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.ranges import FINITE, TIME_LIMIT, Range
from ondevice_rl.spaces import Box, Discrete


class TimeStep(NamedTuple):
    """What ``Environment.step`` returns (unbatched shapes shown).

    Attributes:
        obs: ``[*obs_shape]`` observation after the step.
        state: the environment state after the step.
        reward: ``[]`` float32.
        terminated: ``[]`` bool, a terminal state of the MDP was reached.
        truncated: ``[]`` bool, the time limit was reached (independent of
            ``terminated``, as gymnasium's ``TimeLimit``).
        info: dict of extra arrays (wrappers add to it).
    """

    obs: jax.Array
    state: Any
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    info: dict


class Environment:
    """Base class of the JAX simulators.

    Subclasses implement ``default_params``, ``reset``, ``transition``,
    ``observe``, ``observation_space`` and ``action_space``. Their state is a
    NamedTuple with an int32 ``time`` field (steps taken this episode) and
    their params a NamedTuple with a ``max_steps`` field.
    """

    name: str = "Environment"
    #: Valid values of the params' scalar fields (others: finite; the time
    #: limit ``max_steps``: 1 ≤ max_steps < 2^31).
    PARAM_RANGES: dict[str, Range] = {}
    #: Whether ``transition`` consumes its key. Deterministic dynamics let
    #: wrappers reuse the step key instead of splitting it every step.
    stochastic_step: bool = False

    def default_params(self) -> Any:
        raise NotImplementedError

    def reset(self, key: jax.Array, params: Any) -> tuple[jax.Array, Any]:
        """Returns ``(obs, state)`` of a fresh episode."""
        raise NotImplementedError

    def transition(
        self, key: jax.Array, state: Any, action: jax.Array, params: Any
    ) -> tuple[Any, jax.Array, jax.Array]:
        """Dynamics only: returns ``(state, reward, terminated)``."""
        raise NotImplementedError

    def observe(self, state: Any, params: Any) -> jax.Array:
        raise NotImplementedError

    def step(
        self, key: jax.Array, state: Any, action: jax.Array, params: Any
    ) -> TimeStep:
        """One step; does not reset. ``truncated`` marks the time limit."""
        next_state, reward, terminated = self.transition(key, state, action, params)
        next_state = next_state._replace(time=state.time + 1)
        truncated = next_state.time >= params.max_steps
        return TimeStep(
            obs=self.observe(next_state, params),
            state=next_state,
            reward=jnp.asarray(reward, jnp.float32),
            terminated=jnp.asarray(terminated, jnp.bool_),
            truncated=truncated,
            info={},
        )

    def check_params(self, values: dict[str, Any]) -> dict[str, Any]:
        """Checks ``{field: value}`` overrides of this env's params: known
        scalar fields, in range. Returns them cast to the fields' kinds;
        raises a one-line ValueError naming the field, value and range."""
        import difflib

        import numpy as np

        defaults = self.default_params()
        fields = getattr(defaults, "_fields", ())
        checked = {}
        for name, value in values.items():
            if name not in fields or np.ndim(getattr(defaults, name)) != 0:
                close = difflib.get_close_matches(name, fields, n=2, cutoff=0.5)
                hint = f" (did you mean {', '.join(close)}?)" if close else ""
                raise ValueError(
                    f"{self.name} has no scalar param {name!r}{hint}; "
                    f"known: {', '.join(fields)}"
                )
            default = self.PARAM_RANGES.get(name, FINITE)
            valid = TIME_LIMIT if name == "max_steps" else default
            number = valid.check(f"env param {name}", value)
            if np.issubdtype(np.asarray(getattr(defaults, name)).dtype, np.integer):
                if number != int(number):
                    raise ValueError(
                        f"env param {name} must be an integer, got {value!r}"
                    )
                number = int(number)
            checked[name] = number
        return checked

    def observation_space(self, params: Any) -> Box:
        raise NotImplementedError

    def action_space(self, params: Any) -> Discrete | Box:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"
