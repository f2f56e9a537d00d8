"""MuJoCo Playground adapter: names, MJX physics against MuJoCo's C
simulator, our time limit, no reset inside ``step``, resets for the ended
episodes only (the message without
Playground: test_adapters.py)."""

import importlib.util

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ondevice_rl import envs
from ondevice_rl.env.wrappers import AutoReset
from ondevice_rl.envs.mjx_adapter import DM_CONTROL_SUITE

# Found, not imported: importing Playground (MJX, Warp) takes about 4 s,
# which every pytest worker would pay while collecting.
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mujoco_playground") is None,
    reason="needs mujoco_playground (pip install 'ondevice_rl[mjx]')",
)


def test_names_are_playgrounds_dm_control_suite():
    from mujoco_playground import registry  # imported here: see pytestmark

    assert set(DM_CONTROL_SUITE) == set(registry.dm_control_suite.ALL_ENVS)
    listed = [n for n in envs.names() if n.startswith("mjx/")]
    assert sorted(listed) == sorted(f"mjx/{n}" for n in DM_CONTROL_SUITE)


@pytest.fixture(scope="module")
def cartpole():
    """The env, its params, and the two programs both tests run (compiling
    MJX is most of their time): ``jit(vmap(reset))`` and
    ``jit(vmap(AutoReset(env).step))``, params unbatched (traced: a time
    limit of 4 steps and one of 1000 share the program)."""
    env, params = envs.make("mjx/CartpoleBalance")
    wrapped = AutoReset(env)
    reset = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))
    step = jax.jit(jax.vmap(wrapped.step, in_axes=(0, 0, 0, None)))
    return env, params, wrapped, reset, step


def test_physics_matches_mujoco_c(cartpole):
    """20 control steps of MJX (under jit) against ``mujoco.mj_step`` from the
    same reset state and the same actions (env 0 of a batch of 3, stepped
    through ``AutoReset``: within the time limit, its step is the env's)."""
    import mujoco

    env, params, _, reset, step = cartpole
    keys = jax.random.split(jax.random.PRNGKey(3), 3)
    _, state = reset(keys, params)
    start = jax.device_get(state)
    actions = jnp.sin(jnp.arange(20, dtype=jnp.float32))[:, None]  # in [-1, 1]
    qpos = []
    for a in actions:
        ts = step(keys, state, jnp.broadcast_to(a, (3, 1)), params)
        assert not bool((ts.terminated | ts.truncated).any())
        state = ts.state
        qpos.append(state.mjx_state.data.qpos[0])

    model = env.inner.mj_model
    data = mujoco.MjData(model)
    data.qpos[:] = np.asarray(start.mjx_state.data.qpos[0])
    data.qvel[:] = np.asarray(start.mjx_state.data.qvel[0])
    substeps = env.inner.n_substeps
    expected = []
    for a in np.asarray(actions):
        data.ctrl[:] = a
        for _ in range(substeps):
            mujoco.mj_step(model, data)
        expected.append(data.qpos.copy())
    expected = np.stack(expected)
    np.testing.assert_allclose(np.stack(qpos), expected, atol=1e-4)
    assert float(np.abs(expected[-1] - expected[0]).max()) > 1e-3  # it moved


def test_spaces_time_limit_and_resets_for_the_ended_episodes_only(cartpole):
    """Our time limit; no reset inside Playground's step; and, since its
    resets run physics (CheetahRun's settles for 200 steps), ``AutoReset``
    resets only the envs whose episode ended, each from its own key."""
    env, params, wrapped, reset, step = cartpole
    assert int(params.max_steps) == 1000  # Playground's episode_length
    assert env.observation_space(params).shape == (5,)
    assert env.action_space(params).shape == (1,)
    np.testing.assert_array_equal(env.inner.mj_model.actuator_ctrlrange, [[-1, 1]])
    params = params._replace(max_steps=jnp.int32(4))
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    fresh, state = jax.device_get(reset(keys, params))
    assert fresh.shape == (3, 5) and fresh.dtype == jnp.float32
    assert wrapped.costly_reset
    state = state._replace(time=jnp.array([0, 1, 0], jnp.int32))  # env 1 ends first
    actions = jnp.zeros((3, 1))
    for t in range(4):
        ts = jax.device_get(step(keys, state, actions, params))
        state = ts.state
        np.testing.assert_array_equal(ts.truncated, [t == 3, t == 2, t == 3])
        assert not bool(ts.terminated.any()) and ts.reward.dtype == jnp.float32
        assert bool(((ts.reward > 0) & (ts.reward <= 1)).all())  # dm_control
        if t == 2:  # env 1 restarted from its key's reset, the others go on
            np.testing.assert_array_equal(state.time, [3, 0, 3])
            # (the reset ran in another program: equal up to rounding)
            np.testing.assert_allclose(ts.obs[1], fresh[1], rtol=1e-6, atol=1e-8)
            np.testing.assert_array_equal(ts.obs[[0, 2]], ts.info["final_obs"][[0, 2]])
    # Playground's own step did not reset: what it reached is no fresh state.
    assert not np.allclose(ts.info["final_obs"], fresh)
    np.testing.assert_array_equal(state.time, [0, 1, 0])
    np.testing.assert_allclose(ts.obs[[0, 2]], fresh[[0, 2]], rtol=1e-6, atol=1e-8)
