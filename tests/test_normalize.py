"""Running statistics and reward scaling against NumPy, and the learners'
switches: off changes nothing, on keeps the statistics in the train state."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ondevice_rl import normalize as nz


def test_running_stats_match_numpy_over_any_batching():
    rng = np.random.default_rng(0)
    data = rng.normal(3.0, 2.0, size=(37, 5, 3)).astype(np.float32) * [1, 10, 0.1]
    stats = nz.init_stats((3,))
    for start, size in [(0, 1), (1, 7), (8, 20), (28, 9)]:  # uneven batches
        stats = jax.jit(nz.update)(stats, data[start : start + size])  # [N, 5, 3]
    flat = data.reshape(-1, 3).astype(np.float64)
    count = nz.INITIAL_COUNT + len(flat)
    # With the initial pseudo-sample (mean 0, var 1, weight 1e-4), exactly:
    mean = flat.sum(0) / count
    var = (nz.INITIAL_COUNT * (1 + mean**2) + ((flat - mean) ** 2).sum(0)) / count
    np.testing.assert_allclose(stats.count, count, rtol=1e-6)
    np.testing.assert_allclose(stats.mean, mean, rtol=1e-5)
    np.testing.assert_allclose(stats.var, var, rtol=1e-4)
    np.testing.assert_allclose(stats.mean, flat.mean(0), rtol=1e-4)
    np.testing.assert_allclose(stats.var, flat.var(0), rtol=1e-3)
    z = nz.normalize(stats, jnp.asarray(data))
    np.testing.assert_allclose(z.reshape(-1, 3).mean(0), 0.0, atol=1e-3)
    np.testing.assert_allclose(z.reshape(-1, 3).std(0), 1.0, rtol=1e-3)
    assert float(jnp.max(nz.normalize(stats, jnp.full((3,), 1e9)))) == nz.CLIP


def test_reward_scaling_matches_a_host_normalize_reward():
    """The on-device scaler against a NumPy ``VecNormalize``-style loop:
    G ← γG + r; update the return statistics; r / sqrt(var + eps); G ← 0 at
    episode ends."""
    rng = np.random.default_rng(1)
    T, B, gamma = 50, 4, 0.9
    rewards = rng.normal(1.0, 5.0, size=(T, B)).astype(np.float32)
    dones = rng.random((T, B)) < 0.1
    scaler = nz.init_reward_scaler(B)
    got = []
    for chunk in (slice(0, 20), slice(20, 50)):  # two rollouts
        scaler, scaled = jax.jit(nz.scale_rewards)(
            scaler, rewards[chunk], dones[chunk], jnp.float32(gamma)
        )
        got.append(np.asarray(scaled))
    got = np.concatenate(got)

    returns, mean, var, count = np.zeros(B), 0.0, 1.0, nz.INITIAL_COUNT
    want = []
    for t in range(T):
        returns = returns * gamma + rewards[t]
        b_mean, b_var, n = returns.mean(), returns.var(), B
        delta, total = b_mean - mean, count + n
        mean = mean + delta * n / total
        var = (var * count + b_var * n + delta**2 * count * n / total) / total
        count = total
        want.append(np.clip(rewards[t] / np.sqrt(var + nz.EPS), -10, 10))
        returns[dones[t]] = 0.0
    np.testing.assert_allclose(got, np.stack(want), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(scaler.stats.var, var, rtol=1e-4)
    np.testing.assert_allclose(scaler.returns, returns, rtol=1e-4, atol=1e-5)


def test_disabled_normalizer_has_no_leaves():
    assert jax.tree.leaves(nz.init_normalizer((4,), 8, False, False)) == []
    norm = nz.init_normalizer((4,), 8, True, True)
    assert norm.obs.mean.shape == (4,) and norm.reward.returns.shape == (8,)


@pytest.mark.parametrize(
    "algo",
    [
        "ppo",
        # The on-policy kit's normaliser plumbing, as ppo's: checked under slow.
        pytest.param("a2c", marks=pytest.mark.slow),
    ],
)
def test_learners_keep_statistics_in_the_train_state_under_vmap(algo):
    from ondevice_rl.train.kit.registry import get_algorithm

    algorithm = get_algorithm(algo)
    config = algorithm.config(
        env="Pendulum-v1",
        total_timesteps=4 * 2 * 16,
        num_envs=4,
        num_steps=16,
        normalize_obs=True,
        normalize_rewards=True,
    )
    trainer = algorithm.make_trainer(config)
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    run = jax.jit(
        jax.vmap(
            lambda k, hp: trainer.run(trainer.init(k, hp), hp, None, 2),
            in_axes=(0, None),
        )
    )
    state, metrics = run(keys, config.hyperparams)
    norm = state.normalizer
    assert norm.obs.mean.shape == (2, 3) and norm.reward.returns.shape == (2, 4)
    np.testing.assert_allclose(norm.obs.count, nz.INITIAL_COUNT + 2 * 16 * 4)
    assert not np.allclose(norm.obs.mean[0], norm.obs.mean[1])  # per member
    assert np.all(np.isfinite(metrics["episode_return"]))
