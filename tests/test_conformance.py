"""Every port against gymnasium, step by step, with resets and time limits."""

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ondevice_rl import make
from ondevice_rl.checks.reference import (
    ConformanceReport,
    Mismatch,
    check_conformance,
    start_near_time_limit,
)
from ondevice_rl.envs.gymnasium_sync import SYNC_FUNCTIONS

PI = np.pi


def check_against_gymnasium(env_id, **kwargs):
    """``check_conformance`` of the registered port ``env_id`` against
    ``gymnasium.make(env_id)`` with ``SYNC_FUNCTIONS[env_id]``."""
    env, params = make(env_id)
    kwargs.setdefault("params", params)
    reference = gymnasium.make(env_id)
    try:
        return check_conformance(
            env, reference, sync_state=SYNC_FUNCTIONS[env_id], **kwargs
        )
    finally:
        reference.close()


def _uniform(key, low, high):
    return jax.random.uniform(key, (), jnp.float32, low, high)


def _mixed(*starts):
    """A start_state_fn choosing uniformly among ``starts`` (None = as reset)."""

    def start(key, state, params):
        key_pick, *keys = jax.random.split(key, len(starts) + 1)
        pick = jax.random.randint(key_pick, (), 0, len(starts))
        out = state
        for i, (fn, k) in enumerate(zip(starts, keys, strict=True)):
            if fn is not None:
                candidate = fn(k, state, params)
                out = jax.tree.map(
                    lambda a, b, i=i: jnp.where(pick == i, a, b), candidate, out
                )
        return out

    return start


def _near_limit(key, state, params):
    return state._replace(time=params.max_steps - 3)


def _late(key, state, params):
    """Starts within the last 100 steps before the time limit."""
    left = jax.random.randint(key, (), 1, 100)
    return state._replace(time=params.max_steps - left)


def _mountain_car_start(goal, as_reset=True):
    def near_goal(key, state, params):
        k1, k2, k3 = jax.random.split(key, 3)
        state = state._replace(
            position=_uniform(k1, goal - 0.1, goal), velocity=_uniform(k2, 0.0, 0.07)
        )
        return _late(k3, state, params)

    def near_wall(key, state, params):
        k1, k2, k3 = jax.random.split(key, 3)
        state = state._replace(
            position=_uniform(k1, -1.2, -1.1), velocity=_uniform(k2, -0.07, 0.0)
        )
        return _late(k3, state, params)

    starts = (near_goal, near_wall, _near_limit)
    return _mixed(None, *starts) if as_reset else _mixed(*starts)


def _acrobot_start(key, state, params):
    k = jax.random.split(key, 4)
    return state._replace(
        theta1=_uniform(k[0], -PI, PI),
        theta2=_uniform(k[1], -PI, PI),
        dtheta1=_uniform(k[2], -4 * PI, 4 * PI),
        dtheta2=_uniform(k[3], -9 * PI, 9 * PI),
    )


def _pendulum_start(key, state, params):
    k1, k2 = jax.random.split(key)
    return state._replace(
        theta=_uniform(k1, -20.0, 20.0), theta_dot=_uniform(k2, -8, 8)
    )


def _box_sampler(low, high):
    return lambda key: jax.random.uniform(key, (1,), jnp.float32, low, high)


# (env id, steps, extra check_conformance arguments). Steps: enough for the
# ends NEEDS_TERMINATION and the test ask for, with room (seed 1: CartPole
# 66 episodes, Acrobot 6 terminations, MountainCar 5, MountainCarContinuous
# 7, Pendulum 5 truncations).
CASES = {
    "CartPole-v1": (1000, dict(start_state_fn=start_near_time_limit(0.3, 3))),
    "Acrobot-v1": (
        2000,
        dict(start_state_fn=_mixed(None, _acrobot_start, _near_limit)),
    ),
    "MountainCar-v0": (2000, dict(start_state_fn=_mountain_car_start(0.5))),
    "MountainCarContinuous-v0": (
        1000,
        dict(
            start_state_fn=_mountain_car_start(0.45, as_reset=False),
            # Beyond the action bounds: the dynamics clip, the energy cost not.
            action_sampler=_box_sampler(-1.5, 1.5),
        ),
    ),
    "Pendulum-v1": (
        1000,
        dict(
            start_state_fn=_mixed(None, _pendulum_start),
            action_sampler=_box_sampler(-3.0, 3.0),
        ),
    ),
}

# Which episode ends each case must exercise.
NEEDS_TERMINATION = {
    "CartPole-v1",
    "Acrobot-v1",
    "MountainCar-v0",
    "MountainCarContinuous-v0",
}


@pytest.mark.parametrize("env_id", sorted(CASES))
def test_port_matches_gymnasium(env_id):
    num_steps, kwargs = CASES[env_id]
    report = check_against_gymnasium(env_id, num_steps=num_steps, seed=1, **kwargs)
    assert report.ok, str(report)
    assert report.steps == num_steps
    assert report.truncations >= 2, str(report)
    if env_id in NEEDS_TERMINATION:
        assert report.terminations >= 2, str(report)
    assert report.episodes >= 4, str(report)


@pytest.mark.parametrize(
    "env_id", ["MountainCar-v0", "Pendulum-v1", "MountainCarContinuous-v0"]
)
def test_random_actions_reach_the_time_limit(env_id):
    """Plain random play (no start-state tricks) hits these limits too."""
    report = check_against_gymnasium(env_id, num_steps=1000)
    assert report.ok, str(report)
    assert report.truncations >= 1


def test_wrong_physics_is_reported():
    env, params = make("CartPole-v1")
    wrong = params._replace(gravity=jnp.float32(12.0))
    report = check_conformance(
        env,
        gymnasium.make("CartPole-v1"),
        sync_state=SYNC_FUNCTIONS["CartPole-v1"],
        params=wrong,
        num_steps=200,
    )
    assert not report.ok
    assert {m.field for m in report.mismatches} >= {"obs"}
    first = report.mismatches[0]
    assert isinstance(first, Mismatch) and first.step == 0
    assert "mismatches" in str(report) and "step 0 obs" in str(report)


def test_wrong_time_limit_is_reported():
    env, params = make("Pendulum-v1")
    report = check_conformance(
        env,
        gymnasium.make("Pendulum-v1"),
        sync_state=SYNC_FUNCTIONS["Pendulum-v1"],
        params=params._replace(max_steps=jnp.int32(150)),
        num_steps=400,
    )
    fields = {m.field for m in report.mismatches}
    assert fields == {"max_steps", "truncated"}, str(report)


def test_unsynced_time_limit_is_reported():
    """Without syncing the TimeLimit's step count truncation drifts apart."""
    env, params = make("CartPole-v1")
    reference = gymnasium.make("CartPole-v1")

    def sync_without_time(reference_env, state):
        u = reference_env.unwrapped
        u.state = np.array([state.x, state.x_dot, state.theta, state.theta_dot])
        u.steps_beyond_terminated = None

    report = check_conformance(
        env,
        reference,
        sync_state=sync_without_time,
        num_steps=300,
        start_state_fn=start_near_time_limit(1.0, 3),
    )
    assert {m.field for m in report.mismatches} == {"truncated"}, str(report)


def test_wrong_observation_layout_is_reported():
    env, params = make("MountainCar-v0")

    class Swapped(type(env)):
        def observe(self, state, params):
            return jnp.stack([state.velocity, state.position])

    report = check_conformance(
        Swapped(),
        gymnasium.make("MountainCar-v0"),
        sync_state=SYNC_FUNCTIONS["MountainCar-v0"],
        num_steps=50,
    )
    assert {m.field for m in report.mismatches} == {"obs", "reset_obs"}


def test_report_ok_and_str():
    report = ConformanceReport("X", steps=3, episodes=1, terminations=1, truncations=0)
    assert report.ok and "OK" in str(report)
    bad = ConformanceReport(
        "X", 3, 1, 1, 0, [Mismatch(i, "reward", 1.0, 0.0) for i in range(12)]
    )
    assert not bad.ok
    text = str(bad)
    assert "12 mismatches" in text and "and 2 more" in text


def test_sync_functions_cover_the_gymnasium_ports():
    assert set(SYNC_FUNCTIONS) == set(CASES)
