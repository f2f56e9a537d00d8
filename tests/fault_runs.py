"""The tiny run the fault tests break, and how they check the outcome.

One PPO run (8 updates in segments of 2, a checkpoint every 2: 4, 6 and 8
kept), trained once per process (``reference``); the CLI's flags for the
same run (``TRAIN``); a subprocess running the CLI (``spawn``), under a
fault when asked. The reference's programs go to the suite's compile cache
(``cached_even_if_quick``), where the subprocesses find them.
"""

import functools
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
from suite_flags import cached_even_if_quick

from ondevice_rl.files.checkpoint import Checkpoints
from ondevice_rl.train import get_algorithm
from ondevice_rl.train.run.artifacts import read_metrics
from ondevice_rl.train.run.runner import train_from_config

SEED = 3
CONFIG = dict(env="CartPole-v1", total_timesteps=4096, hidden=(8,))
TRAIN = [
    "train", "--env", "CartPole-v1", "--total-timesteps", "4096", "--hidden", "8",
    "--segments", "4", "--checkpoint-every", "2", "--seed", str(SEED), "--no-progress",
]  # fmt: skip
CLI = "import sys; from ondevice_rl.train.cli import main; sys.exit(main())"
TESTS = Path(__file__).parent


def train_tiny(out, **kwargs):
    """The run, through ``train_from_config``."""
    config = get_algorithm("ppo").config(**CONFIG)
    return train_from_config(
        config, seed=SEED, out_dir=out, num_segments=4, checkpoint_every=2,
        progress=False, **kwargs,
    )  # fmt: skip


@functools.cache
def _reference(root: Path):
    out = root / "reference"
    with cached_even_if_quick():
        result = train_tiny(out)
    return out, read_metrics(out / "metrics.jsonl"), result.state


def reference(tmp_path_factory):
    """The uninterrupted run's directory, rows and final state (once per
    process); ask for the ``suite_cache`` fixture with it."""
    return _reference(tmp_path_factory.getbasetemp() / "fault-reference")


def assert_same_as(reference, out, state=None):
    """``out`` ends as the reference: rows, final checkpoint, state."""
    ref_dir, rows, ref_state = reference
    assert read_metrics(out / "metrics.jsonl") == rows  # exact floats
    with Checkpoints(out / "checkpoint") as checkpoints:
        assert checkpoints.verified() == (8, [])
    if state is not None:
        for x, y in zip(
            jax.tree.leaves(state), jax.tree.leaves(ref_state), strict=True
        ):
            if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
                x, y = jax.random.key_data(x), jax.random.key_data(y)
            np.testing.assert_array_equal(x, y)


def one_line_error(err: str, command: str, *needles: str) -> str:
    """Our error is stderr's last line and ours is one line."""
    lines = err.strip().splitlines()
    assert lines, "nothing on stderr"
    assert lines[-1].startswith(f"ondevice-rl {command}: error: "), err
    assert "Traceback" not in lines[-1]
    for needle in needles:
        assert needle in lines[-1], err
    return lines[-1]


def spawn(args, cache=None, fault=None, real=None, env=None):
    """The CLI in a subprocess, on ``cache`` (default: the suite's) with
    ``fault`` (``(root, errno name, budget[, file name])`` for
    ``fault_injection.py``) or ``real`` (the arguments of ``real_fs.py``),
    ``env`` added to the environment."""
    if fault is not None:
        command = [TESTS / "fault_injection.py", *fault, "--", *args]
    elif real is not None:
        command = [TESTS / "real_fs.py", *real, "--", *args]
    else:
        command = ["-c", CLI, *args]
    env = dict(os.environ, **(env or {}))
    if cache is not None:
        env["ONDEVICE_RL_CACHE_DIR"] = str(cache)
    return subprocess.Popen(
        [sys.executable, *map(str, command)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
