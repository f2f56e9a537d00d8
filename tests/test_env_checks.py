"""``check_env`` passes our ports and adapters and catches planted bugs.

Each planted bug is CartPole with one thing wrong; the check that must catch
it, and only the checks that follow from it, fail.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ondevice_rl import envs
from ondevice_rl.checks.check_env import check_env
from ondevice_rl.checks.report import EnvCheckError
from ondevice_rl.checks.static import require_static, static_checks
from ondevice_rl.env.spaces import Box, Discrete
from ondevice_rl.env.types import TimeStep
from ondevice_rl.envs.cartpole import CartPole

#: Small rollouts: the checks' logic, not the envs' statistics.
SMALL = dict(num_envs=4, num_steps=24, random_sets=1, eager_steps=2)


def _failed(report) -> dict[str, str]:
    return {r.name: r.detail for r in report.failures}


@pytest.mark.parametrize(
    "name",
    [
        "CartPole-v1",  # discrete actions, terminations
        "Pendulum-v1",  # Box actions, truncations only
        "Probe-TwoStep-v0",  # episodes of two steps
    ],
)
def test_our_environments_pass(name):
    env, params = envs.make(name)
    report = check_env(env, params, speed_seconds=0.01, **SMALL)
    assert report.ok, str(report)
    assert report.steps_per_second > 0
    names = [r.name for r in report.results]
    assert {"no reset inside step", "jit equals eager", "params traced"} <= set(names)
    text = str(report)
    assert text.startswith(name) and f"{len(names)} checks: {len(names)} passed" in text


def test_a_gymnax_style_environment_by_entry_string_passes():
    """gymnax's CartPole class, adapted (every gymnax/ name: the slow test)."""
    entry = "gymnax.environments.classic_control.cartpole:CartPole"
    env, params = envs.make(entry)
    assert env.name == entry and int(params.max_steps) == 500
    assert check_env(env, params, speed_seconds=0, **SMALL).ok


class WrongDtype(CartPole):
    def observe(self, state, params):
        return super().observe(state, params).astype(jnp.bfloat16)


class WrongShape(CartPole):
    def observe(self, state, params):
        return super().observe(state, params)[:3]


class IntegerReward(CartPole):
    def step(self, key, state, action, params):
        ts = super().step(key, state, action, params)
        return ts._replace(reward=ts.reward.astype(jnp.int32))


class ResetInsideStep(CartPole):
    def step(self, key, state, action, params):
        ts = super().step(key, state, action, params)
        done = ts.terminated | ts.truncated
        obs, fresh = self.reset(key, params)
        return ts._replace(
            obs=jnp.where(done, obs, ts.obs),
            state=jax.tree.map(lambda a, b: jnp.where(done, a, b), fresh, ts.state),
        )


class TimeLimitAsTermination(CartPole):
    def transition(self, key, state, action, params):
        new, reward, terminated = super().transition(key, state, action, params)
        return new, reward, terminated | (state.time + 1 >= params.max_steps)


class NumpyRandomness(CartPole):
    def transition(self, key, state, action, params):
        new, reward, terminated = super().transition(key, state, action, params)
        push = np.random.uniform(-0.01, 0.01)  # drawn when traced, not per step
        return new._replace(x_dot=new.x_dot + push), reward, terminated


class Float64Default(CartPole):
    def reset(self, key, params):
        obs, state = super().reset(key, params)
        return obs, state._replace(x=state.x + jnp.zeros(()))  # default dtype


class WeakTime(CartPole):
    def reset(self, key, params):
        obs, state = super().reset(key, params)
        return obs, state._replace(time=0.0)


@pytest.mark.parametrize(
    "env, checks, words",
    [
        (
            WrongDtype(),
            {"reset", "step"},
            "reset's obs is bfloat16, the observation space says float32",
        ),
        (
            WrongShape(),
            {"reset", "step"},
            "reset's obs has shape [3], the observation space says [4]",
        ),
        (IntegerReward(), {"step"}, "step's reward is int32[], not float32[]"),
        (
            WeakTime(),  # a Python float: float64 under jax_enable_x64, too
            {"step", "no float64"},
            "state.time (int32[], steps taken this episode) is float32[] weak",
        ),
        (Float64Default(), {"no float64"}, "with jax_enable_x64: float64 in state.x"),
    ],
)
def test_static_bugs_fail_before_anything_compiles(env, checks, words):
    report = check_env(env, **SMALL)
    assert set(_failed(report)) == checks, str(report)
    assert words in next(iter(_failed(report).values()))
    assert "rollout checks skipped" in str(report)
    if checks != {"no float64"}:  # found under jax_enable_x64 only
        with pytest.raises(EnvCheckError) as info:
            require_static(env, env.default_params(), "my.module:factory")
        message = str(info.value)
        assert words in message and "\n" not in message
        assert message.startswith("environment my.module:factory: ")
        assert message.endswith(
            "(`ondevice-rl check-env my.module:factory` runs every check)"
        )


@pytest.mark.parametrize(
    "env, checks, words",
    [
        (
            ResetInsideStep(),  # time back to 0: truncation flags go wrong too
            {"no reset inside step", "truncation at max_steps"},
            "(step must not reset; AutoReset does)",
        ),
        (
            TimeLimitAsTermination(),
            {"termination apart from the time limit"},
            "report the limit as truncated, not terminated",
        ),
        (
            NumpyRandomness(),
            {"same key, same trajectory", "jit equals eager"},
            "op by op",
        ),
    ],
)
def test_rollout_bugs_are_caught(env, checks, words):
    report = check_env(env, speed_seconds=0, **SMALL)
    assert set(_failed(report)) == checks, str(report)
    assert any(words in detail for detail in _failed(report).values()), str(report)


def test_static_checks_pass_our_ports_in_a_trace():
    results, traced = static_checks(*envs.make("Acrobot-v1"))
    assert all(r.ok for r in results) and traced.obs.shape == (6,)
    assert traced.step.reward.dtype == jnp.float32


class GridParams(NamedTuple):
    max_steps: jax.Array


class GridState(NamedTuple):
    position: jax.Array
    time: jax.Array


class Grid:
    """A protocol env (no subclass of ``Environment``): dict observations with
    an integer position and an action mask, Discrete(4) actions."""

    name = "Grid"

    def default_params(self):
        return GridParams(jnp.int32(10))

    def reset(self, key, params):
        state = GridState(jax.random.randint(key, (), 0, 5, jnp.int32), jnp.int32(0))
        return self._obs(state), state

    def step(self, key, state, action, params):
        position = jnp.clip(state.position + jnp.where(action == 0, -1, 1), 0, 4)
        state = GridState(position, state.time + 1)
        return TimeStep(
            obs=self._obs(state),
            state=state,
            reward=jnp.float32(0.0),
            terminated=position == 4,
            truncated=state.time >= params.max_steps,
            info={},
        )

    def _obs(self, state):
        mask = jnp.array([True, True, False, False]) | (state.position == 2)
        return {"position": state.position, "action_mask": mask}

    def observation_space(self, params):
        return {"position": Discrete(5), "action_mask": Box(0, 1, (4,), jnp.bool_)}

    def action_space(self, params):
        return Discrete(4)


def test_pytree_observations_and_action_masks_are_accepted():
    report = check_env(Grid(), speed_seconds=0, **SMALL)
    assert report.ok, str(report)
    assert "action mask" in {r.name for r in report.results}


@pytest.mark.slow
@pytest.mark.parametrize("name", envs.names())  # backends installed
def test_every_registered_environment_passes(name):
    """brax and MJX compile for minutes on CPU, hence slow."""
    env, params = envs.make(name)
    report = check_env(env, params, speed_seconds=0, **SMALL)
    assert report.ok, str(report)
