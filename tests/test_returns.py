"""GAE, λ-returns and n-step returns against NumPy loops and hand-worked cases:
termination stops the bootstrap, truncation bootstraps from ``final_obs``'s
value, the rollout's last step bootstraps, and no recursion crosses an end."""

import jax.numpy as jnp
import numpy as np
import pytest

from ondevice_rl.returns import gae, lambda_returns, n_step_returns

# --- references ----------------------------------------------------------------


def numpy_lambda_returns(rewards, next_values, terminated, truncated, gamma, lam):
    """``G[t] = r + γ(1−term)((1−λ)v' + λG[t+1])``, ``G[t+1]`` cut at ends."""
    T, B = rewards.shape
    out = np.zeros((T, B))
    for b in range(B):
        later = None
        for t in reversed(range(T)):
            boot = 0.0 if terminated[t, b] else next_values[t, b]
            if later is None or terminated[t, b] or truncated[t, b]:
                value = rewards[t, b] + gamma * boot
            else:
                value = rewards[t, b] + gamma * ((1 - lam) * boot + lam * later)
            out[t, b] = later = value
    return out


def numpy_n_step(rewards, next_values, terminated, truncated, gamma, n):
    """Sum of at most ``n`` discounted rewards, then ``γ^m·v'`` unless terminal."""
    T, B = rewards.shape
    out = np.zeros((T, B))
    for b in range(B):
        for t in range(T):
            total, discount = 0.0, 1.0
            for k in range(t, min(t + n, T)):
                total += discount * rewards[k, b]
                discount *= gamma
                if terminated[k, b]:
                    break
                if truncated[k, b] or k == min(t + n, T) - 1:
                    total += discount * next_values[k, b]
                    break
            out[t, b] = total
    return out


def random_rollout(seed, T=23, B=6, p_end=0.15):
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=(T, B)).astype(np.float32)
    next_values = rng.normal(size=(T, B)).astype(np.float32)
    terminated = rng.random((T, B)) < p_end
    truncated = (rng.random((T, B)) < p_end) & ~terminated
    return rewards, next_values, terminated, truncated


def as_jax(*arrays):
    return tuple(jnp.asarray(a) for a in arrays)


# --- hand-worked: columns (no end, terminated at t=1, truncated at t=1) -------------

R = np.array([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0], [3.0, 3.0, 3.0]], np.float32)  # [T, B]
V = np.array([[10.0] * 3, [20.0] * 3, [30.0] * 3], np.float32)
TERM = np.array([[0, 0, 0], [0, 1, 0], [0, 0, 0]], bool)
TRUNC = np.array([[0, 0, 0], [0, 0, 1], [0, 0, 0]], bool)
GAMMA = 0.5


def test_lambda_returns_hand_worked():
    got = lambda_returns(*as_jax(R, V, TERM, TRUNC), GAMMA, 0.5)
    # t=2 is the rollout's end: 3 + .5·30 = 18 in every column.
    # No end:     G1 = 2 + .5(.5·20 + .5·18) = 11.5, G0 = 1 + .5(.5·10 + .5·11.5)
    # Terminated: G1 = 2 (no bootstrap),             G0 = 1 + .5(.5·10 + .5·2)
    # Truncated:  G1 = 2 + .5·20 = 12,               G0 = 1 + .5(.5·10 + .5·12)
    expected = [[6.375, 4.0, 6.5], [11.5, 2.0, 12.0], [18.0, 18.0, 18.0]]
    np.testing.assert_allclose(got, expected, rtol=1e-6)


@pytest.mark.parametrize(
    "n, expected",
    [
        (1, [[6.0, 6.0, 6.0], [12.0, 2.0, 12.0], [18.0, 18.0, 18.0]]),
        # no end: 1 + .5·2 + .25·20; terminated: 1 + .5·2; truncated as no end
        (2, [[7.0, 2.0, 7.0], [11.0, 2.0, 12.0], [18.0, 18.0, 18.0]]),
        # no end: 1 + .5·2 + .25·3 + .125·30 (t=0), rollout end cuts t=1 at 2 rewards
        (3, [[6.5, 2.0, 7.0], [11.0, 2.0, 12.0], [18.0, 18.0, 18.0]]),
    ],
)
def test_n_step_returns_hand_worked(n, expected):
    got = n_step_returns(*as_jax(R, V, TERM, TRUNC), GAMMA, n)
    np.testing.assert_allclose(got, expected, rtol=1e-6)


# --- against the NumPy loops ------------------------------------------------------


@pytest.mark.parametrize("lam", [0.0, 0.65, 0.95, 1.0])
def test_lambda_returns_match_numpy(lam):
    rollout = random_rollout(0)
    got = lambda_returns(*as_jax(*rollout), jnp.float32(0.97), jnp.float32(lam))
    expected = numpy_lambda_returns(*rollout, 0.97, lam)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_n_step_returns_match_numpy(n):
    rollout = random_rollout(1)
    got = n_step_returns(*as_jax(*rollout), jnp.float32(0.9), n)
    expected = numpy_n_step(*rollout, 0.9, n)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_lambda_zero_is_one_step_targets():
    rewards, next_values, terminated, truncated = random_rollout(2)
    got = lambda_returns(
        *as_jax(rewards, next_values, terminated, truncated), 0.99, jnp.float32(0.0)
    )
    expected = rewards + 0.99 * np.where(terminated, 0.0, next_values)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    one_step = n_step_returns(
        *as_jax(rewards, next_values, terminated, truncated), 0.99, 1
    )
    np.testing.assert_allclose(got, one_step, rtol=1e-6, atol=1e-6)


def test_lambda_one_is_n_step_to_rollout_end():
    rollout = random_rollout(3)
    T = rollout[0].shape[0]
    got = lambda_returns(*as_jax(*rollout), 0.95, jnp.float32(1.0))
    to_end = n_step_returns(*as_jax(*rollout), 0.95, None)
    np.testing.assert_allclose(got, to_end, rtol=1e-6, atol=1e-6)
    # ... and to an explicit n at least as long as the rollout.
    explicit = n_step_returns(*as_jax(*rollout), 0.95, T)
    np.testing.assert_allclose(got, explicit, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        got, numpy_n_step(*rollout, 0.95, T), rtol=1e-5, atol=1e-5
    )


def test_gae_targets_are_lambda_returns_when_values_are_consistent():
    # Inside an episode the critic's value of the next observation is the
    # bootstrap value: values[t+1] == next_values[t]. Then GAE's targets
    # (advantages + values) are exactly the λ-returns.
    rewards, next_values, terminated, truncated = random_rollout(4)
    values = np.random.default_rng(5).normal(size=rewards.shape).astype(np.float32)
    ends = terminated | truncated
    next_values[:-1] = np.where(ends[:-1], next_values[:-1], values[1:])
    rollout = as_jax(rewards, next_values, terminated, truncated)
    _, targets = gae(
        rollout[0],
        jnp.asarray(values),
        *rollout[1:],
        jnp.float32(0.97),
        jnp.float32(0.8),
    )
    expected = lambda_returns(*rollout, jnp.float32(0.97), jnp.float32(0.8))
    np.testing.assert_allclose(targets, expected, rtol=1e-5, atol=1e-5)


def test_terminal_vs_truncated_vs_rollout_end_bootstrap():
    # One step, three columns: terminated, truncated, rollout end (neither).
    r = jnp.ones((1, 3), jnp.float32)
    v = jnp.full((1, 3), 5.0, jnp.float32)
    term = jnp.array([[True, False, False]])
    trunc = jnp.array([[False, True, False]])
    for lam in (0.0, 0.5, 1.0):
        got = lambda_returns(r, v, term, trunc, 0.9, jnp.float32(lam))
        np.testing.assert_allclose(got, [[1.0, 5.5, 5.5]], rtol=1e-6)
    np.testing.assert_allclose(
        n_step_returns(r, v, term, trunc, 0.9, 3), [[1.0, 5.5, 5.5]], rtol=1e-6
    )


def test_n_step_rejects_non_positive_n():
    with pytest.raises(ValueError, match="n must be >= 1"):
        n_step_returns(*as_jax(R, V, TERM, TRUNC), GAMMA, 0)


# --- GAE ---------------------------------------------------------------------


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
