"""Episode metrics (reduced in the program) and the one final return."""

import jax.numpy as jnp
import numpy as np
import pytest

from ondevice_rl.env.wrappers import EpisodeStatsState
from ondevice_rl.metrics import (
    EpisodeTracker,
    episode_metrics,
    final_return,
    masked_mean,
)
from ondevice_rl.rollout import EpisodeInfo


def _running(returns, lengths):
    return EpisodeStatsState(
        env_state=None,
        episode_return=jnp.asarray(returns, jnp.float32),
        episode_length=jnp.asarray(lengths, jnp.int32),
    )


def test_mean_over_finished_episodes():
    done = jnp.array([[True, False], [False, True], [True, False]])
    returns = jnp.array([[10.0, 99.0], [99.0, 20.0], [30.0, 99.0]])
    lengths = jnp.array([[1.0, 9.0], [9.0, 2.0], [3.0, 9.0]])
    tracker, metrics = episode_metrics(
        EpisodeInfo(done, returns, lengths),
        _running([5.0, 6.0], [1, 2]),
        EpisodeTracker.create(),
    )
    assert float(metrics["episode_return"]) == pytest.approx(20.0)
    assert float(metrics["episode_length"]) == pytest.approx(2.0)
    assert float(metrics["episodes"]) == 3.0
    assert float(tracker.last_return) == pytest.approx(20.0)


def test_no_episode_yet_reports_the_running_ones_never_nan():
    done = jnp.zeros((4, 2), bool)
    nothing = EpisodeInfo(done, jnp.zeros((4, 2)), jnp.zeros((4, 2)))
    tracker, metrics = episode_metrics(
        nothing, _running([3.0, 5.0], [3, 5]), EpisodeTracker.create()
    )
    assert float(metrics["episode_return"]) == 4.0
    assert float(metrics["episode_length"]) == 4.0
    assert float(metrics["episodes"]) == 0.0
    assert np.isnan(float(tracker.last_return))  # still "none finished yet"
    # Once an episode has finished, an update without one repeats its value.
    held = EpisodeTracker(jnp.float32(42.0), jnp.float32(7.0))
    _, metrics = episode_metrics(nothing, _running([3.0, 5.0], [3, 5]), held)
    assert float(metrics["episode_return"]) == 42.0


def test_masked_mean_fallback():
    x = jnp.array([1.0, 2.0, 3.0])
    assert float(masked_mean(x, jnp.array([True, False, True]), 0.0)) == 2.0
    assert float(masked_mean(x, jnp.zeros(3, bool), jnp.float32(-1.0))) == -1.0


def test_final_return_is_the_mean_of_the_last_ten_updates():
    assert final_return(np.arange(20.0)) == 14.5
    assert final_return(np.arange(4.0)) == 1.5
    assert np.isnan(final_return(np.zeros(0)))
    population = np.stack([np.arange(20.0), np.arange(20.0) + 1])
    np.testing.assert_array_equal(final_return(population), [14.5, 15.5])
