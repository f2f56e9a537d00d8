"""The generic rollout: the learner's act, extras kept, episodes reported apart."""

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl import make
from ondevice_rl.env.wrappers import AutoReset, EpisodeStats
from ondevice_rl.rollout import batch_reset, rollout


def _env(name="Probe-Truncation-v0"):
    env, params = make(name)
    return EpisodeStats(AutoReset(env)), params


def test_act_chooses_actions_and_its_extras_are_stacked():
    env, params = _env("CartPole-v1")
    state = batch_reset(env, params, jax.random.key(0), num_envs=3)

    def act(policy_params, obs, key):
        action = jnp.ones(obs.shape[0], jnp.int32)  # always push right
        extras = {"tag": obs[:, 0] * 0 + policy_params, "pair": (obs, key)}
        return action, action, extras

    state, traj, episodes = rollout(env, params, act, 7.0, state, num_steps=5)
    assert traj.obs.shape == (5, 3, 4) and traj.final_obs.shape == (5, 3, 4)
    assert traj.action.shape == (5, 3) and np.all(traj.action == 1)
    assert traj.extras["tag"].shape == (5, 3) and np.all(traj.extras["tag"] == 7.0)
    np.testing.assert_array_equal(traj.extras["pair"][0], traj.obs)
    assert episodes.done.shape == episodes.returns.shape == (5, 3)
    # Pushing right always: the cart's velocity grows at every step.
    assert np.all(np.diff(np.asarray(traj.final_obs[:, :, 1]), axis=0) > 0)


def test_env_action_is_what_the_env_gets_and_action_is_what_is_stored():
    env, params = _env("Pendulum-v1")
    state = batch_reset(env, params, jax.random.key(1), num_envs=2)

    def act(_, obs, key):
        action = jnp.full((obs.shape[0], 1), 100.0)  # far outside [-2, 2]
        return action, jnp.clip(action, -2.0, 2.0), ()

    _, traj, _ = rollout(env, params, act, None, state, num_steps=3)
    assert np.all(traj.action == 100.0) and traj.extras == ()
    # Pendulum's cost includes 0.001 * u^2: the env saw u = 2, not 100.
    theta = np.arctan2(traj.obs[..., 1], traj.obs[..., 0])
    cost = theta**2 + 0.1 * traj.obs[..., 2] ** 2 + 0.001 * 2.0**2
    np.testing.assert_allclose(-np.asarray(traj.reward), cost, rtol=1e-4, atol=1e-5)


def test_truncation_keeps_final_obs_and_reports_the_episode():
    # Probe-Truncation-v0: observation 1, reward 1 per step, time limit 5.
    env, params = _env()
    state = batch_reset(env, params, jax.random.key(2), num_envs=2)

    def act(_, obs, key):
        action = jnp.zeros(obs.shape[0], jnp.int32)
        return action, action, ()

    _, traj, episodes = rollout(env, params, act, None, state, num_steps=12)
    truncated = np.asarray(traj.truncated[:, 0])
    assert truncated.tolist() == [t in (4, 9) for t in range(12)]
    assert not np.any(traj.terminated)
    np.testing.assert_array_equal(episodes.done, traj.truncated)
    assert np.all(np.asarray(episodes.returns)[np.asarray(episodes.done)] == 5.0)
    assert np.all(np.asarray(episodes.lengths)[np.asarray(episodes.done)] == 5)
    assert np.all(traj.final_obs == 1.0)


def test_rollout_is_deterministic_in_its_key_and_vmaps_over_populations():
    env, params = _env("CartPole-v1")

    def act(_, obs, key):
        action = jax.random.bernoulli(key, 0.5, obs.shape[:1]).astype(jnp.int32)
        return action, action, ()

    def collect(key):
        state = batch_reset(env, params, key, num_envs=4)
        return rollout(env, params, act, None, state, num_steps=20)[1]

    keys = jax.random.split(jax.random.key(3), 2)
    both = jax.jit(jax.vmap(collect))(keys)
    first = jax.jit(collect)(keys[0])
    np.testing.assert_array_equal(both.obs[0], first.obs)
    assert not np.array_equal(both.action[0], both.action[1])
