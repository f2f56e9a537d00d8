"""GAE against a NumPy loop and a hand-worked example."""

import jax.numpy as jnp
import numpy as np

from ondevice_rl.gae import gae


def numpy_gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    T, B = rewards.shape
    adv = np.zeros((T, B))
    carry = np.zeros(B)
    for t in reversed(range(T)):
        boot = np.where(terminated[t], 0.0, next_values[t])
        delta = rewards[t] + gamma * boot - values[t]
        stop = terminated[t] | truncated[t]
        carry = delta + gamma * lam * np.where(stop, 0.0, carry)
        adv[t] = carry
    return adv


def test_gae_matches_numpy_loop():
    rng = np.random.default_rng(0)
    T, B = 37, 5
    rewards = rng.normal(size=(T, B)).astype(np.float32)
    values = rng.normal(size=(T, B)).astype(np.float32)
    next_values = rng.normal(size=(T, B)).astype(np.float32)
    terminated = rng.random((T, B)) < 0.1
    truncated = rng.random((T, B)) < 0.1
    adv, targets = gae(
        jnp.asarray(rewards),
        jnp.asarray(values),
        jnp.asarray(next_values),
        jnp.asarray(terminated),
        jnp.asarray(truncated),
        jnp.float32(0.97),
        jnp.float32(0.9),
    )
    expected = numpy_gae(rewards, values, next_values, terminated, truncated, 0.97, 0.9)
    np.testing.assert_allclose(adv, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(targets, expected + values, rtol=1e-5, atol=1e-5)


def test_gae_hand_worked_truncation_vs_termination():
    # One env, three steps, reward 1 each, values 0 everywhere except the
    # bootstrap value of the final observation (10). gamma=0.5, lambda=1.
    rewards = jnp.ones((3, 1))
    values = jnp.zeros((3, 1))
    next_values = jnp.array([[0.0], [0.0], [10.0]])
    no = jnp.zeros((3, 1), bool)
    last = jnp.array([[False], [False], [True]])
    half, one = jnp.float32(0.5), jnp.float32(1.0)

    truncated_adv, _ = gae(rewards, values, next_values, no, last, half, one)
    # A_2 = 1 + 0.5*10 = 6; A_1 = 1 + 0.5*6 = 4; A_0 = 1 + 0.5*4 = 3.
    np.testing.assert_allclose(truncated_adv[:, 0], [3.0, 4.0, 6.0])

    terminated_adv, _ = gae(rewards, values, next_values, last, no, half, one)
    # No bootstrap: A_2 = 1; A_1 = 1.5; A_0 = 1.75.
    np.testing.assert_allclose(terminated_adv[:, 0], [1.75, 1.5, 1.0])


def test_gae_stops_at_episode_boundary():
    # A boundary at t=0 must cut the recursion from t=1 back into t=0.
    rewards = jnp.array([[0.0], [100.0]])
    values = jnp.zeros((2, 1))
    next_values = jnp.zeros((2, 1))
    term = jnp.array([[True], [False]])
    no = jnp.zeros((2, 1), bool)
    adv, _ = gae(rewards, values, next_values, term, no, jnp.float32(0.9), 1.0)
    np.testing.assert_allclose(adv[:, 0], [0.0, 100.0])
