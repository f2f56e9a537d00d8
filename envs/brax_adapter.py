"""A brax environment behind our protocol (brax is imported lazily).

``brax.envs.get_environment(name)`` gives the bare environment (no episode or
auto-reset wrapper); ``PhysicsAdapter`` adds the time limit (default 1000).
Install with ``pip install 'ondevice_rl[brax]'``.

    env, params = ondevice_rl.make("brax/ant")
"""

from typing import Any, NamedTuple

import jax

from ondevice_rl.envs.physics_adapter import PhysicsAdapter


class BraxState(NamedTuple):
    brax_state: Any  # brax.envs.State
    time: jax.Array  # [] int32


class BraxAdapter(PhysicsAdapter):
    """Wraps ``brax.envs.get_environment(name, **kwargs)``."""

    state_type = BraxState

    def __init__(self, brax_name: str, max_steps: int = 1000, **kwargs: Any):
        try:  # lazy: brax is an optional extra
            from brax import envs as brax_envs
        except ImportError as e:
            raise ImportError(
                "brax is not installed: pip install 'ondevice_rl[brax]'"
            ) from e
        inner = brax_envs.get_environment(brax_name, **kwargs)
        super().__init__(inner, f"brax/{brax_name}", max_steps)
