"""train_from_config: segments, equality with the one-shot program, interrupts."""

import json
import os
import signal

import jax
import numpy as np
import pytest
from suite_flags import PRODUCT_EMITTERS, product_emitters

from ondevice_rl.files import checkpoint
from ondevice_rl.train.ppo import PPOConfig, make_train
from ondevice_rl.train.run.artifacts import read_metrics
from ondevice_rl.train.run.runner import train_from_config

# 12 updates of 4 x 16 steps on a narrow net; 3 segments -> [4, 4, 4], one
# segment program. Small: its programs (the one-shot comparison's compiled
# twice, with XLA:CPU's own emitters) build and run faster; what is checked
# holds at any size (segments of different lengths composing: test_log_rows
# re-plans a run into [2, 1, 1, ...] and test_resume stops one anywhere).
CONFIG = PPOConfig(
    env="CartPole-v1",
    num_steps=16,
    hidden=(8,),
    update_epochs=2,
    num_minibatches=2,
    total_timesteps=12 * 4 * 16,
)
SEGMENTS = 3

# Its tests share their programs (the process's program cache): one xdist worker.
pytestmark = pytest.mark.xdist_group("runner")


def _key_data(x):
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        return jax.random.key_data(x)
    return x


def _assert_trees_equal(a, b):
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(_key_data(x), _key_data(y))


def test_segmented_run_matches_one_shot():
    """Same key, same program pieces: the segmented run equals jit(make_train)."""
    with product_emitters():
        result = train_from_config(
            CONFIG, seed=3, num_segments=SEGMENTS, progress=False
        )
    key, hp = jax.random.key(3), CONFIG.hyperparams
    lowered = jax.jit(make_train(CONFIG)).lower(key, hp)
    one_shot = lowered.compile(compiler_options=PRODUCT_EMITTERS)(key, hp)

    assert set(result.metrics) == set(one_shot.metrics)
    for name, values in one_shot.metrics.items():
        assert result.metrics[name].shape == (CONFIG.num_updates,)
        np.testing.assert_allclose(result.metrics[name], values, rtol=1e-5)
        # Bitwise equal on CPU with jax 0.10.2 (same XLA ops in both programs).
        np.testing.assert_array_equal(result.metrics[name], values)
    _assert_trees_equal(result.state, one_shot.state)
    assert result.env_steps == CONFIG.num_updates * CONFIG.batch_size
    assert not result.interrupted
    assert result.compile_s >= 0 and result.run_s > 0 and result.sps > 0
    expected = np.mean(np.asarray(one_shot.metrics["episode_return"])[-10:])
    assert result.final_return == pytest.approx(float(expected))


def test_interrupt_keeps_what_was_collected(tmp_path):
    calls = []

    def stop_after_second(updates, env_steps, episode_return):
        calls.append((updates, env_steps))
        if len(calls) == 2:
            raise KeyboardInterrupt

    with product_emitters():  # the programs of the test above, from the cache
        result = train_from_config(
            CONFIG,
            seed=0,
            out_dir=tmp_path,
            num_segments=SEGMENTS,
            progress=False,
            on_segment=stop_after_second,
        )
    assert result.interrupted
    assert calls == [(4, 4 * CONFIG.batch_size), (8, 8 * CONFIG.batch_size)]
    assert result.metrics["episode_return"].shape == (8,)
    assert result.env_steps == 8 * CONFIG.batch_size

    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert [r["update"] for r in rows] == list(range(1, 9))
    np.testing.assert_allclose(
        [r["episode_return"] for r in rows], result.metrics["episode_return"]
    )
    info = json.loads((tmp_path / "config.json").read_text())
    assert info["status"] == "interrupted" and info["updates"] == 8
    assert (tmp_path / "curve.png").read_bytes()[:4] == b"\x89PNG"
    # The latest checkpoint holds the state after the 2nd segment.
    with checkpoint.Checkpoints(tmp_path / "checkpoint") as checkpoints:
        assert checkpoints.latest() == 8
        restored = checkpoints.restore(8, result.state)
    _assert_trees_equal(restored, result.state)
    assert int(restored.update_step) == 8


def test_ctrl_c_stops_after_the_running_segment(default_sigint):
    """A real SIGINT: the run finishes the segment in flight, then stops."""

    def press_ctrl_c(updates, env_steps, episode_return):
        if updates == 4:
            os.kill(os.getpid(), signal.SIGINT)

    before = signal.getsignal(signal.SIGINT)
    with product_emitters():  # the programs compiled above, from the cache
        result = train_from_config(
            CONFIG,
            seed=0,
            num_segments=SEGMENTS,
            progress=False,
            on_segment=press_ctrl_c,
        )
    assert result.interrupted
    assert result.metrics["episode_return"].shape == (4,)
    assert int(result.state.update_step) == 4
    assert signal.getsignal(signal.SIGINT) is before


def test_unknown_hyperparameter_is_rejected():
    with pytest.raises(ValueError, match="unknown hyperparameters"):
        train_from_config(CONFIG, hyperparams={"lr": 1e-3}, progress=False)
