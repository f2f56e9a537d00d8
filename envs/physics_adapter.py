"""The part brax and MuJoCo Playground adapters share: both environments
keep a ``State`` with ``obs``, ``reward`` and ``done``, step as
``step(state, action)`` with no key, reset as ``reset(key)``, and declare
``observation_size`` and ``action_size`` (actions in ``[-1, 1]``).

We add the time limit: ``truncated = time >= max_steps``; ``terminated =
done``. Their physics is deterministic, so ``step`` ignores its key. Their
state stays 32-bit (``narrow_64_bit``) should ``jax_enable_x64`` be on.
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.env.spaces import Box
from ondevice_rl.env.types import Environment, TimeStep
from ondevice_rl.envs.gymnax_adapter import narrow_64_bit


class PhysicsParams(NamedTuple):
    max_steps: jax.Array  # [] int32


class PhysicsAdapter(Environment):
    """Wraps ``inner``, an environment with the interface above.

    ``state_type`` is the subclass's NamedTuple ``(inner state, time)``: its
    first field's name (``brax_state``, ``mjx_state``) is part of the paths a
    checkpoint stores, so each adapter keeps its own.
    """

    stochastic_step = False
    state_type: type

    def __init__(self, inner: Any, name: str, max_steps: int):
        self.inner = inner
        self.name = name
        self._max_steps = int(max_steps)
        self._observation_size: int | None = None

    def default_params(self) -> PhysicsParams:
        return PhysicsParams(jnp.int32(self._max_steps))

    def reset(self, key, params):
        state = narrow_64_bit(self.inner.reset(key))
        return state.obs, self.state_type(state, jnp.int32(0))

    def step(self, key, state, action, params) -> TimeStep:
        inner = narrow_64_bit(self.inner.step(state[0], action))
        time = state.time + 1
        return TimeStep(
            obs=inner.obs,
            state=self.state_type(inner, time),
            reward=jnp.asarray(inner.reward, jnp.float32),
            terminated=inner.done > 0.5,
            truncated=time >= params.max_steps,
            info={},
        )

    def observation_space(self, params):
        # Found once, by a trace: brax's ``observation_size`` runs a reset op
        # by op at every call (seconds on CPU), Playground's traces one.
        if self._observation_size is None:
            obs = jax.eval_shape(self.inner.reset, jax.random.PRNGKey(0)).obs
            self._observation_size = int(obs.shape[-1])
        return Box(-jnp.inf, jnp.inf, (self._observation_size,), jnp.float32)

    def action_space(self, params):
        return Box(-1.0, 1.0, (int(self.inner.action_size),), jnp.float32)
