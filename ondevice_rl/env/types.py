"""The environment protocol shared by every simulator and wrapper.

An environment is a set of pure functions of explicit ``(key, state, action,
params)``; ``params`` is a pytree of traced physics constants plus the time
limit ``max_steps``, so populations can vmap over it. One instance is one
unbatched environment: batch with ``jax.vmap``.
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.env.spaces import Box, Discrete
from ondevice_rl.ranges import FINITE, TIME_LIMIT, Range


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
    #: Whether a reset costs far more than a step (a generated world):
    #: ``AutoReset`` then computes resets for the ended episodes only
    #: (``ondevice_rl.env.reset_where``) instead of one per step, selected.
    costly_reset: bool = False

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
        scalar fields (of the params, or of a params record nested in them,
        as an adapter's suite params), in range. Returns them cast to the
        fields' kinds; raises a one-line ValueError naming the field, value
        and range. ``replace_params`` applies them."""
        import difflib

        import numpy as np

        defaults = self.default_params()
        fields = scalar_param_fields(defaults)
        checked = {}
        for name, value in values.items():
            if name not in fields:
                close = difflib.get_close_matches(name, fields, n=2, cutoff=0.5)
                hint = f" (did you mean {', '.join(close)}?)" if close else ""
                raise ValueError(
                    f"{self.name} has no scalar param {name!r}{hint}; "
                    f"known: {', '.join(fields)}"
                )
            default = self.PARAM_RANGES.get(name, FINITE)
            valid = TIME_LIMIT if name == "max_steps" else default
            number = valid.check(f"env param {name}", value)
            if np.issubdtype(np.asarray(fields[name]).dtype, np.integer):
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


def _record_fields(record: Any) -> dict[str, Any] | None:
    """A NamedTuple's or a dataclass's ``{field: value}`` (None otherwise)."""
    import dataclasses

    if hasattr(record, "_fields"):
        return dict(zip(record._fields, record, strict=True))
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        return {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}
    return None


def scalar_param_fields(params: Any) -> dict[str, Any]:
    """``{name: default}`` of the scalar params a run may override: the
    params' own scalar fields, then those of a record nested one level in
    them (a suite's params inside an adapter's) unless the name is taken."""
    import numpy as np

    top = _record_fields(params) or {}
    fields = {k: v for k, v in top.items() if _record_fields(v) is None}
    fields = {k: v for k, v in fields.items() if np.ndim(v) == 0}
    for value in top.values():
        for name, inner in (_record_fields(value) or {}).items():
            if name not in fields and np.ndim(inner) == 0:
                fields[name] = inner
    return fields


def replace_params(params: Any, values: dict[str, Any]) -> Any:
    """``params`` with the overrides ``values`` (names as ``check_params``
    takes them) set, nested records included."""
    import dataclasses

    top = _record_fields(params)
    own = {k: v for k, v in values.items() if k in top}
    params = params._replace(**own) if own else params
    rest = {k: v for k, v in values.items() if k not in own}
    for name, record in (_record_fields(params) or {}).items():
        inner = _record_fields(record)
        mine = {k: v for k, v in rest.items() if inner is not None and k in inner}
        if mine:
            record = (
                record._replace(**mine)
                if hasattr(record, "_fields")
                else dataclasses.replace(record, **mine)
            )
            params = params._replace(**{name: record})
            rest = {k: v for k, v in rest.items() if k not in mine}
    if rest:
        raise ValueError(f"unknown env param(s): {', '.join(rest)}")
    return params
