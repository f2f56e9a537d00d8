"""``bench env --compare`` for the JAX suites: each suite's own auto-resetting
step, vmapped the way its users write it, beside our adapter in
``EpisodeStats(AutoReset(env))`` (``env_speed.bench_ours``), with the same
random policy, batch sizes and scan lengths.

The suites' own auto-resets (each one computes a reset every step and
selects, as ours does, unless said otherwise):

* Craftax: the ``auto_reset=True`` environment's ``step``;
* Navix: ``env.step(timestep, action)`` (a ``lax.cond`` on the previous step
  type: under ``vmap``, both branches);
* XLand-MiniGrid: ``GymAutoResetWrapper``;
* Jumanji: ``AutoResetWrapper`` (a ``lax.cond`` on ``timestep.last()``);
* popgym-arcade: ``step_env``, ``reset_env`` and a select, as its gymnax
  (stable-gymnax) defines ``step`` (gymnax 1.0.1's ``step`` reads a time
  limit popgym-arcade does not set);
* pgx: ``pgx.experimental.auto_reset(env.step, env.init)``.

Each native step is given a suite action: our ``Discrete`` index, turned
into Jumanji's several choices where it has them (as the adapter does).
"""

from collections.abc import Callable
from typing import Any

import jax

from ondevice_rl import envs

#: One env per suite benchmarked by default (when the suite is installed).
SUITE_ENVS = (
    "craftax/Craftax-Classic-Symbolic-v1",
    "navix/Navix-Empty-8x8-v0",
    "xminigrid/MiniGrid-Empty-8x8",
    "jumanji/Maze-v0",
    "popgym/CartPoleEasy",
    "pgx/2048",
)
#: The batch sizes of the suites' default runs (a Craftax world is ~100 kB).
SUITE_BATCHES = (1, 64, 1024, 4096)
#: How many times fewer steps a suite's scan takes than one of our ports'
#: (on 2 CPU cores: popgym-arcade renders a 128×128 frame every step, ~2k
#: steps/s; Craftax's own auto-reset generates a world every step, ~350).
SCAN_SHRINK = {"popgym": 64, "craftax": 128}
DEFAULT_SHRINK = 4

#: ``(reset(key, params) -> carry, step_done(key, carry, action, params) ->
#: (carry, done))``, unbatched, and the params to pass. The carry is what a
#: user's loop keeps: the suite's state and the observation (inside the
#: state where the suite keeps it there).
Native = tuple[Callable, Callable, Any]


def installed_suite_envs() -> tuple[str, ...]:
    """``SUITE_ENVS`` whose suite is installed."""
    return tuple(name for name in SUITE_ENVS if name in envs.names())


def has_native(name: str) -> bool:
    return name.partition("/")[0] in NATIVES


def scan_shrink(name: str) -> int:
    """How many times shorter the scans of suite env ``name`` are."""
    return SCAN_SHRINK.get(name.partition("/")[0], DEFAULT_SHRINK)


def native_step(name: str) -> Native:
    """The suite's own auto-resetting step for our env ``name``."""
    prefix, _, suite_id = name.partition("/")
    adapter, _ = envs.make(name)
    return NATIVES[prefix](adapter, suite_id)


def _craftax(adapter: Any, suite_id: str) -> Native:
    # lazy: each suite is an optional extra
    from craftax.craftax_env import make_craftax_env_from_name

    env = make_craftax_env_from_name(suite_id, auto_reset=True)

    def reset(key, params):
        obs, state = env.reset(key, params)
        return state, obs

    def step_done(key, carry, action, params):
        obs, state, _, done, _ = env.step(key, carry[0], action, params)
        return (state, obs), done

    return reset, step_done, adapter.default_params().env_params


def _navix(adapter: Any, suite_id: str) -> Native:
    # lazy: each suite is an optional extra
    import navix

    env = navix.make(suite_id)

    def reset(key, params):
        return env.reset(key)  # its observation inside

    def step_done(key, timestep, action, params):
        timestep = env.step(timestep, action)
        return timestep, timestep.is_done()

    return reset, step_done, None


def _xminigrid(adapter: Any, suite_id: str) -> Native:
    # lazy: each suite is an optional extra
    import xminigrid
    from xminigrid.wrappers import GymAutoResetWrapper

    env, env_params = xminigrid.make(suite_id)
    env = GymAutoResetWrapper(env)

    def reset(key, params):
        return env.reset(params, key)  # its observation inside

    def step_done(key, timestep, action, params):
        timestep = env.step(params, timestep, action)
        return timestep, timestep.last()

    return reset, step_done, env_params


def _jumanji(adapter: Any, suite_id: str) -> Native:
    # lazy: each suite is an optional extra
    import jumanji
    from jumanji.wrappers import AutoResetWrapper

    env = AutoResetWrapper(jumanji.make(suite_id))

    def reset(key, params):
        state, timestep = env.reset(key)
        return state, timestep.observation

    def step_done(key, carry, action, params):
        state, timestep = env.step(carry[0], adapter._suite_action(action))
        return (state, timestep.observation), timestep.last()

    return reset, step_done, None


def _popgym(adapter: Any, suite_id: str) -> Native:
    env = adapter.popgym_env  # popgym-arcade's game (see the adapter)

    def reset(key, params):
        obs, state = env.reset_env(key, params)
        return state, obs

    def step_done(key, carry, action, params):
        step_key, reset_key = jax.random.split(key)
        obs, state, _, done, _ = env.step_env(step_key, carry[0], action, params)
        fresh_obs, fresh = env.reset_env(reset_key, params)
        carry = jax.tree.map(
            lambda a, b: jax.lax.select(done, a, b), (fresh, fresh_obs), (state, obs)
        )
        return carry, done

    return reset, step_done, adapter.default_params().env_params


def _pgx(adapter: Any, suite_id: str) -> Native:
    # lazy: each suite is an optional extra
    import pgx
    from pgx.experimental import auto_reset

    env = pgx.make(suite_id)
    step = auto_reset(env.step, env.init)

    def reset(key, params):
        return env.init(key)  # its observation inside

    def step_done(key, state, action, params):
        state = step(state, action, key)
        return state, state.terminated | state.truncated

    return reset, step_done, None


NATIVES: dict[str, Callable[[Any, str], Native]] = {
    "craftax": _craftax,
    "navix": _navix,
    "xminigrid": _xminigrid,
    "jumanji": _jumanji,
    "popgym": _popgym,
    "pgx": _pgx,
}


def suite_row_name(name: str) -> str:
    """The bench row of the suite's own step for our env ``name``."""
    return f"{name} (suite's auto-reset)"
