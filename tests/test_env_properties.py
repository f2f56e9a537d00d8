"""Properties of every registered environment (hypothesis): for random keys
and in-range params, the checks of ``ondevice_rl.checks.rollouts`` on one
compiled ``jit(vmap)`` rollout — observations finite, rewards finite,
``step`` never resets, truncation exactly at ``max_steps`` — and the static
checks (declared shapes and dtypes) once per environment. New params never
recompile."""

import functools

import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ondevice_rl import envs
from ondevice_rl.checks.params import scaled_params
from ondevice_rl.checks.rollouts import Rollouts, rollout_checks
from ondevice_rl.checks.static import static_checks

STEPS, BATCH = 24, 4


#: gymnax's MinAtar games compile for 2-8 s each at opt level 0 (their
#: adapter is checked in tests/test_adapters.py): under ``slow``.
SLOW_IDS = {
    f"gymnax/{g}-MinAtar"
    for g in ("Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders")
}
#: gymnax's classic-control envs: our ports' twins, scanned under jit and vmap
#: with AutoReset by tests/test_adapters.py::test_gymnax_adapters_scan_with_auto_reset
#: (CartPole's steps also against our port's); the adapter's own checks here
#: (no reset inside step, truncation) run on every other gymnax env.
SLOW_IDS |= {
    f"gymnax/{g}"
    for g in (
        "CartPole-v1",
        "Acrobot-v1",
        "MountainCar-v0",
        "MountainCarContinuous-v0",
        "Pendulum-v1",
    )
}
SLOW = pytest.mark.slow


def _tested():
    """The native ports and the gymnax adapters. brax and mjx envs compile for
    25 s to minutes on CPU (tests/test_env_checks.py checks them under
    ``slow``); the JAX suites' adapters are checked beside each suite's own
    API in tests/test_suites.py. Nothing is constructed here: this runs at
    collection, in every worker."""
    names = [n for n in envs.names() if "/" not in n or n.startswith("gymnax/")]
    return [pytest.param(n, marks=SLOW) if n in SLOW_IDS else n for n in names]


@functools.cache
def _rollouts(name):
    """The static checks once, then ``jit(vmap(episode))``, params traced."""
    env, defaults = envs.make(name)
    results, _ = static_checks(env, defaults, under_x64=False)
    assert all(r.ok for r in results), [r for r in results if not r.ok]
    space = env.observation_space(defaults)  # a dict of spaces beside a mask
    spaces = space.values() if isinstance(space, dict) else [space]
    masks = space.get("action_mask") if isinstance(space, dict) else None
    assert all(s.dtype == jnp.float32 for s in spaces if s is not masks)
    return Rollouts(env, BATCH, STEPS)


#: Examples per environment: the native ports get the most, the 25 gymnax
#: adapters fewer (each compiles a program of its own; their dynamics are
#: gymnax's).
EXAMPLES = {"gymnax/": 3}


def _examples(name):
    return next((n for p, n in EXAMPLES.items() if name.startswith(p)), 8)


@pytest.mark.parametrize("name", _tested())
def test_steps_are_well_formed(name):
    @settings(max_examples=_examples(name), deadline=None)
    @given(
        seed=st.integers(0, 2**32 - 1),
        scales=st.lists(st.floats(0.5, 2.0), min_size=1, max_size=6),
        limit_fraction=st.floats(0.01, 1.0),
    )
    def check(seed, scales, limit_fraction):
        _check(name, seed, scales, limit_fraction)

    check()


def _check(name, seed, scales, limit_fraction):
    rollouts = _rollouts(name)
    params = scaled_params(
        rollouts.env, rollouts.env.default_params(), scales, limit_fraction
    )
    results = rollout_checks(rollouts.run(params, seed), params)
    assert all(r.ok for r in results), [r for r in results if not r.ok]
    assert rollouts.program._cache_size() == 1  # new params never recompile
