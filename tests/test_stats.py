"""IQM, stratified-bootstrap CIs and performance profiles
(train/sweep/stats.py) against rliable's numbers.

``RLIABLE`` holds what rliable 1.2.0 gives for ``SCORES`` (50,000
resamples, ``np.random.seed(0)``): IQM and profiles must match exactly,
interval ends within bootstrap noise. The slow test recomputes them with
rliable itself (the ``rliable`` extra).
"""

import numpy as np
import pytest

from ondevice_rl.train.sweep import stats

SCORES = {
    "two tasks": np.array(
        [
            [12.0, 0.5],
            [30.0, 0.9],
            [25.0, 0.1],
            [7.0, 0.7],
            [19.0, 0.3],
            [40.0, 0.8],
            [3.0, 0.2],
            [22.0, 0.6],
        ]
    ),  # fmt: skip
    "cartpole": np.array([500.0, 260.0, 352.0, 451.0, 442.0, 500.0, 498.0, 447.0]),
}
RLIABLE = {"two tasks": (5.5, 2.3625, 10.625), "cartpole": (459.5, 374.5, 499.0)}
TAUS = np.array([300.0, 450.0, 499.0])
RLIABLE_PROFILE = ([0.875, 0.5, 0.25], [[0.625, 0.125, 0.0], [1.0, 0.875, 0.625]])


def test_iqm_is_the_mean_of_the_middle_half():
    # 8 runs: drop the 2 lowest (260, 352) and the 2 highest (500, 500).
    assert stats.iqm(SCORES["cartpole"]) == (442 + 447 + 451 + 498) / 4
    # 16 scores over two tasks: the middle 8 of all of them.
    flat = np.sort(SCORES["two tasks"].reshape(-1))
    assert stats.iqm(SCORES["two tasks"]) == flat[4:12].mean()


def test_intervals_match_rliable_and_repeat():
    got = stats.interval_estimates(SCORES, reps=20_000)
    for name, (point, low, high) in RLIABLE.items():
        spread = np.ptp(SCORES[name])
        assert got[name][0] == point
        np.testing.assert_allclose(got[name][1:], (low, high), atol=0.02 * spread)
        assert got[name][1] <= point <= got[name][2]
    assert stats.interval_estimates(SCORES, reps=20_000) == got
    assert stats.interval_estimates(SCORES, reps=20_000, seed=1) != got
    with_nan = stats.interval_estimates(
        {"x": np.array([1.0, np.nan, 3.0]), "none": np.array([np.nan])}
    )
    assert with_nan["x"][0] == 2.0 and np.isnan(with_nan["none"]).all()


def test_performance_profile_matches_rliable():
    profiles, bands = stats.performance_profiles(
        {"cartpole": SCORES["cartpole"]}, TAUS, reps=20_000
    )
    np.testing.assert_array_equal(profiles["cartpole"], RLIABLE_PROFILE[0])
    np.testing.assert_allclose(bands["cartpole"], RLIABLE_PROFILE[1], atol=0.126)


@pytest.mark.slow
def test_against_rliable_itself():
    """With the rliable extra (``pip install -e '.[rliable]'``)."""
    import warnings

    rliable = pytest.importorskip("rliable.library")
    from rliable import metrics

    np.random.seed(0)  # rliable resamples with NumPy's global generator
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        points, intervals = rliable.get_interval_estimates(
            {k: v.reshape(len(v), -1) for k, v in SCORES.items()},
            lambda x: np.array([metrics.aggregate_iqm(x)]),
            reps=50_000,
        )
    for name in SCORES:
        want = (points[name][0], *intervals[name][:, 0])
        np.testing.assert_allclose(
            stats.interval_estimates(SCORES)[name], want, atol=0.5
        )
        assert stats.iqm(SCORES[name]) == want[0]
