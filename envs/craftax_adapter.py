"""Craftax (Classic and full; symbolic or pixel observations) behind our
protocol. Install with ``pip install 'ondevice_rl[craftax]'``.

    env, params = ondevice_rl.make("craftax/Craftax-Classic-Symbolic-v1")

The step is the ``step`` of Craftax's ``auto_reset=False`` environment
(``make_craftax_env_from_name(name, auto_reset=False)``): the dynamics
alone, so our ``AutoReset`` computes the only reset, a fresh world from a
fresh key (the auto-resetting environment would generate a second world
every step and select between the two). Craftax jits its ``reset`` and
``step`` itself; inside our compiled programs they are inlined, and called
op by op they share Craftax's compiled programs.

Craftax returns one ``done``: its time limit (``state.timestep >=
params.max_timesteps``) or death (or lava, or the boss beaten). Craftax reads
``max_timesteps`` nowhere else, so the step runs with it set out of reach:
its ``done`` is then exactly the termination, and the truncation is ours, at
``params.max_steps`` (default Craftax's own limit: 10,000 steps for Classic,
100,000 for full Craftax). Craftax's other params (day length, mob
chances, ...) are traced leaves of ``params.env_params``.
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.envs.gymnax_adapter import _space, narrow_64_bit
from ondevice_rl.envs.suite_adapter import NO_LIMIT, SuiteAdapter, import_suite

#: The Craftax environments adapted (``craftax.craftax_env``'s names).
CRAFTAX_IDS = (
    "Craftax-Classic-Symbolic-v1",
    "Craftax-Classic-Pixels-v1",
    "Craftax-Symbolic-v1",
    "Craftax-Pixels-v1",
)


class CraftaxParams(NamedTuple):
    env_params: Any  # Craftax's EnvParams (32-bit leaves)
    max_steps: jax.Array  # [] int32, our time limit


class CraftaxState(NamedTuple):
    craftax_state: Any  # Craftax's EnvState
    time: jax.Array  # [] int32


class CraftaxAdapter(SuiteAdapter):
    """Wraps ``make_craftax_env_from_name(craftax_id, auto_reset=False)``."""

    state_type = CraftaxState
    stochastic_step = True
    costly_reset = True  # a generated world: ~20 steps' worth on CPU

    def __init__(self, craftax_id: str, max_steps: int | None = None):
        module = import_suite("craftax.craftax_env", "craftax", "craftax")
        self.name = f"craftax/{craftax_id}"
        self.craftax_env = module.make_craftax_env_from_name(
            craftax_id, auto_reset=False
        )
        self._craftax_params = narrow_64_bit(self.craftax_env.default_params)
        limit = self._craftax_params.max_timesteps
        self._max_steps = int(limit if max_steps is None else max_steps)

    def default_params(self) -> CraftaxParams:
        return CraftaxParams(self._craftax_params, jnp.int32(self._max_steps))

    def _reset(self, key, params):
        return self.craftax_env.reset(key, params.env_params)

    def _step(self, key, inner, action, params):
        unlimited = params.env_params.replace(max_timesteps=jnp.int32(NO_LIMIT))
        obs, inner, reward, done, _ = self.craftax_env.step(
            key, inner, action, unlimited
        )
        return obs, inner, reward, done

    def observation_space(self, params):
        return _space(self.craftax_env.observation_space(params.env_params))

    def action_space(self, params):
        return _space(self.craftax_env.action_space(params.env_params))
