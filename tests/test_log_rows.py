"""Metrics rows reduced on the device (``--log-every``), the final return
from every update's own value, resumes that keep it, and segments re-planned
shorter when one takes too long."""

import json

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from suite_flags import product_emitters

from ondevice_rl.metrics import log_rows, row_updates
from ondevice_rl.train.ppo import PPOConfig
from ondevice_rl.train.run import loop
from ondevice_rl.train.run.artifacts import read_metrics
from ondevice_rl.train.run.checks import default_log_every
from ondevice_rl.train.run.plan import shorter_length
from ondevice_rl.train.run.runner import resume_training, train_from_config
from ondevice_rl.train.services.programs import PROGRAMS

# Its module-scoped programs are built once: its tests share one xdist worker.
pytestmark = pytest.mark.xdist_group("log-rows")

NAN = np.nan
#: 24 updates of 2 x 8 steps: a small program, quick to compile.
TINY = PPOConfig(
    env="CartPole-v1",
    num_envs=2,
    num_steps=8,
    hidden=(8,),
    update_epochs=1,
    num_minibatches=1,
    total_timesteps=16 * 24,
)


def test_rows_by_hand():
    metrics = {
        "episode_return": jnp.array([3.0, 6.0, 9.0, 7.0, 4.0]),  # [U]
        "episode_length": jnp.array([10.0, 40.0, 5.0, 5.0, 5.0]),
        "episodes": jnp.array([2.0, 1.0, 0.0, 4.0, 0.0]),
        "loss": jnp.array([1.0, 2.0, 3.0, 4.0, 5.0]),
        "eval_return": jnp.array([NAN, 8.0, NAN, NAN, NAN]),
    }
    rows = jax.device_get(log_rows(metrics, 2, sparse=("eval_return",)))
    # Rows over updates (1, 2), (3, 4), (5): returns weighted by episodes.
    np.testing.assert_allclose(rows["episode_return"], [4.0, 7.0, NAN])
    np.testing.assert_allclose(rows["episode_length"], [20.0, 5.0, NAN])
    np.testing.assert_array_equal(rows["episodes"], [3.0, 4.0, 0.0])
    np.testing.assert_allclose(rows["loss"], [1.5, 3.5, 5.0])
    np.testing.assert_allclose(rows["eval_return"], [8.0, NAN, NAN])
    np.testing.assert_array_equal(row_updates(10, 5, 2), [12, 14, 15])

    one = jax.device_get(log_rows(metrics, 1))  # each update itself, bit for bit
    np.testing.assert_array_equal(one["loss"], metrics["loss"])
    np.testing.assert_array_equal(one["episode_return"], [3.0, 6.0, NAN, 7.0, NAN])


def test_the_default_interval_keeps_a_run_within_a_thousand_rows():
    cases = {976: 1, 1000: 1, 1001: 2, 6250: 10, 50_000: 50, 500_000: 500}
    assert {u: default_log_every(u) for u in cases} == cases
    assert all(-(-u // default_log_every(u)) <= 1000 for u in (3, 1999, 10**7))


def test_the_default_interval_keeps_segments_short_beside_evaluations():
    """Segments run a multiple of both intervals: with evaluations every 781
    updates, rows every 100 would make one segment of 78,100 updates (a
    62,500-update run in one piece); the default becomes 71, a divisor."""
    from ondevice_rl.train.run.plan import plan_segments

    assert default_log_every(62_500) == 100
    assert default_log_every(62_500, 781) == 71
    assert default_log_every(62_500, 500) == 100  # a multiple: kept
    assert default_log_every(62_500, 50) == 100  # a divisor: kept
    assert default_log_every(62_500, 997) == 997  # a prime: its own
    assert default_log_every(62_500, 30) == 90  # shorter: a multiple
    assert default_log_every(500, 7) == 1  # a row per update fits
    segments = plan_segments(62_500, 3125, 781, log_every=71)
    assert {s.length for s in segments[:-1]} == {3905} and len(segments) == 17


def test_shorter_segments_halve_until_they_fit():
    assert shorter_length(40, 5.0, 10.0, 1) == 40  # fits
    assert shorter_length(40, 25.0, 10.0, 1) == 10  # 40 -> 20 -> 10
    assert shorter_length(40, 25.0, 10.0, 4) == 8  # multiples of 4: 20, 8
    assert shorter_length(40, 1e9, 10.0, 3) == 3  # never below one grain


@pytest.fixture(scope="module")
def plain():
    """Every update logged, in 12 segments of 2 (the default plan)."""
    return train_from_config(TINY, seed=1, num_segments=12, progress=False)


def test_rows_of_four_updates_and_a_resume_keep_the_final_return(plain, tmp_path):
    """Rows are the per-update metrics reduced; the final return is the last
    10 updates' own values, also after a resume that ran only 8 of them."""
    calls = []

    def stop_after_second(done, steps, latest):
        calls.append(done)
        if len(calls) == 2:
            raise KeyboardInterrupt

    out = tmp_path / "run"
    kwargs = dict(seed=1, num_segments=3, progress=False, log_every=4)
    first = train_from_config(TINY, out_dir=out, on_segment=stop_after_second, **kwargs)
    assert first.interrupted and first.updates.tolist() == [4, 8, 12, 16]
    rest = resume_training(out, progress=False)  # one segment of 8: 16 -> 24
    assert rest.resumed_from == 16
    assert rest.updates.tolist() == [4, 8, 12, 16, 20, 24]
    expected = jax.device_get(log_rows(plain.metrics, 4))  # NaN rows weigh 0
    for name, values in expected.items():
        # atol: pg_loss averages to ~1e-8 here, and under the suite's
        # compile-speed flags the one-shot and segmented programs may sum the
        # value head's kernel gradient in another order (the programs are
        # bitwise equal under XLA's defaults: test_runner).
        np.testing.assert_allclose(
            rest.metrics[name], values, rtol=1e-5, atol=1e-6, err_msg=name
        )
    assert rest.final_return == plain.final_return
    rows = read_metrics(out / "metrics.jsonl")
    assert [r["update"] for r in rows] == [4, 8, 12, 16, 20, 24]
    assert [r["env_steps"] for r in rows] == [64, 128, 192, 256, 320, 384]
    info = json.loads((out / "config.json").read_text())
    assert info["log_every"] == 4 and info["final_return"] == rest.final_return


def test_a_slow_segment_replans_the_rest_shorter_with_the_same_numbers(
    monkeypatch, tmp_path
):
    with product_emitters():
        plain = train_from_config(TINY, seed=1, num_segments=12, progress=False)
        monkeypatch.setattr(loop, "SEGMENT_SECONDS", 0.0)  # every segment too slow
        compiles = PROGRAMS.compiles
        out = tmp_path / "run"
        result = train_from_config(TINY, seed=1, out_dir=out, progress=False)
    assert PROGRAMS.compiles - compiles == 1  # the 1-update segment, once
    info = json.loads((out / "config.json").read_text())
    assert info["segments"] == [2] + [1] * 22 and info["segment_length"] == 1
    chex.assert_trees_all_equal(result.metrics, plain.metrics)
    assert result.final_return == plain.final_return
    np.testing.assert_array_equal(result.updates, np.arange(1, 25))
