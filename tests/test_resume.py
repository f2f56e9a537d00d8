"""Nothing lost: checkpoints, resume, SIGINT/SIGTERM/kill -9 on real
subprocesses, a second signal, the NaN guard, the output directory rules."""

import json
import os
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest
from suite_flags import cached_even_if_quick
from suite_flags import fast_compiles as _fast_compiles

from ondevice_rl.files.checkpoint import Checkpoints
from ondevice_rl.train import get_algorithm
from ondevice_rl.train.cli import main
from ondevice_rl.train.kit.registry import trainer_for
from ondevice_rl.train.run.artifacts import RunDirError, read_metrics
from ondevice_rl.train.run.runner import (
    STOP_MESSAGE,
    resume_training,
    train_from_config,
)

# Its module-scoped programs are built once: its tests share one xdist worker.
pytestmark = pytest.mark.xdist_group("resume")

# 48 updates of 4 envs x 32 steps, 12 segments of 4; a checkpoint after each
# (the segments' host work, not their compute, sets how long a run lasts: a
# stopped run has ten segments to go when the signal is sent).
ARGS = [
    "--env", "CartPole-v1", "--total-timesteps", "6144", "--num-envs", "4",
    "--num-steps", "32", "--update-epochs", "1", "--num-minibatches", "1",
    "--segments", "12", "--checkpoint-every", "4", "--hidden", "8",
    "--no-progress", "--seed", "5",
]  # fmt: skip
UPDATES = 48
# SIGINT's default handler back: pytest-xdist workers ignore SIGINT, and
# children inherit that (set here, not in a preexec_fn: this process runs
# JAX's threads, and a fork that runs Python code may deadlock).
CLI = (
    "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from ondevice_rl.train.cli import main; sys.exit(main())"
)


def _env(cache_dir):
    env = dict(os.environ)
    env["ONDEVICE_RL_CACHE_DIR"] = str(cache_dir)  # compile once for all runs
    return env


def _cli(args, cache_dir, **kwargs):
    return subprocess.Popen(
        [sys.executable, "-c", CLI, "train", *args],
        env=_env(cache_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def _wait_for_rows(path, rows, proc, timeout=240):
    start = time.time()
    while time.time() - start < timeout and proc.poll() is None:
        if path.exists() and len(read_metrics(path)) >= rows:
            return
        time.sleep(0.05)


def _final_state(run_dir, like):
    with Checkpoints(run_dir / "checkpoint") as checkpoints:
        step = checkpoints.latest()
        return step, checkpoints.restore(step, like)


def _resume_in_process(run_dir):
    """The resume through the CLI's entry, in this process: the reference's
    programs are reused, nothing compiles."""
    assert main(["train", "--resume", str(run_dir), "--no-progress"]) == 0


@pytest.fixture(scope="module")
def reference(tmp_path_factory, suite_cache):
    """The uninterrupted run, through the same CLI (in this process), and the
    compile cache holding its programs for the stopped runs' processes."""
    base = tmp_path_factory.mktemp("resume")
    out = base / "reference"
    with cached_even_if_quick():
        assert main(["train", *ARGS, "--out", str(out)]) == 0
    info = json.loads((out / "config.json").read_text())
    algorithm = get_algorithm(info["algo"])
    config = algorithm.config(
        **{**info["config"], "hidden": tuple(info["config"]["hidden"])}
    )
    trainer = trainer_for(config)
    like = jax.jit(trainer.init)(jax.random.key(0), config.hyperparams)
    step, state = _final_state(out, like)
    return base, read_metrics(out / "metrics.jsonl"), (step, state), suite_cache


def _assert_same_run(run_dir, reference):
    _, rows, (step, state), _ = reference
    assert read_metrics(run_dir / "metrics.jsonl") == rows  # exact floats
    got_step, got = _final_state(run_dir, state)
    assert got_step == step == UPDATES
    for x, y in zip(
        jax.tree.leaves(got.params), jax.tree.leaves(state.params), strict=True
    ):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize(
    "sig, status",
    [
        (signal.SIGTERM, 143),
        # Ctrl-C takes SIGTERM's path (one handler): checked under slow.
        pytest.param(signal.SIGINT, 130, marks=pytest.mark.slow),
        (signal.SIGKILL, -9),
    ],
)
def test_stopped_anywhere_then_resumed_equals_uninterrupted(sig, status, reference):
    base, cache = reference[0], reference[3]
    out = base / f"stopped-{sig.name}"
    proc = _cli([*ARGS, "--out", str(out)], cache)
    _wait_for_rows(out / "metrics.jsonl", 8, proc)
    proc.send_signal(sig)
    code = proc.wait(timeout=120)
    assert code in (status, 0), proc.stderr.read()  # 0: it had just finished
    if code == status and sig != signal.SIGKILL:
        err = proc.stderr.read()
        assert f"resume with: ondevice-rl train --resume {out}" in err
        assert json.loads((out / "config.json").read_text())["status"] == "interrupted"
    rows = read_metrics(out / "metrics.jsonl")
    assert [r["update"] for r in rows] == list(range(1, len(rows) + 1))
    _resume_in_process(out)
    _assert_same_run(out, reference)


#: A process that asks for a stop the way a run does, then is signalled twice:
#: the first signal only notes the stop, the second exits at once.
TWICE = """
import os, signal, sys, time
from ondevice_rl.train.services.interrupt import stop_at_boundary
with stop_at_boundary(lambda m: print(m, file=sys.stderr, flush=True), "noted") as stop:
    os.kill(os.getpid(), signal.SIGTERM)
    assert stop.signal == signal.SIGTERM  # the handler ran between the two
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)
print("not reached")
"""


def test_a_second_signal_exits_at_once_with_the_signals_status():
    proc = subprocess.run(
        [sys.executable, "-c", TWICE], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 143, proc.stderr
    assert proc.stderr.splitlines() == ["SIGTERM: noted", "SIGTERM again: stopping now"]
    assert proc.stdout == ""


def test_a_second_signal_during_the_stop_keeps_the_last_checkpoint(reference):
    base, cache = reference[0], reference[3]
    out = base / "twice"
    proc = _cli([*ARGS, "--out", str(out)], cache)
    _wait_for_rows(out / "metrics.jsonl", 4, proc)
    proc.send_signal(signal.SIGTERM)
    # The second once the first is noted (two at once would merge into one):
    # whether it lands inside the segment or at its end, the run stops with
    # SIGTERM's status and what it checkpointed resumes to the same numbers.
    noted = proc.stderr.readline()
    while noted and STOP_MESSAGE not in noted:
        noted = proc.stderr.readline()
    assert STOP_MESSAGE in noted
    proc.send_signal(signal.SIGTERM)
    sent = time.time()
    assert proc.wait(timeout=60) == 143
    assert time.time() - sent < 10.0  # process teardown included; loaded CI
    _resume_in_process(out)
    _assert_same_run(out, reference)


def test_resume_refuses_program_changes_and_allows_extending(reference, capsys):
    run_dir = reference[0] / "reference"
    argv = ["train", "--resume", str(run_dir), "--no-progress"]
    assert main([*argv, "--num-envs", "8"]) == 2
    err = capsys.readouterr().err
    assert "--num-envs 8 would change the program" in err and err.count("\n") == 1
    assert main([*argv, "--total-timesteps", "1024"]) == 2
    assert "only extending" in capsys.readouterr().err
    assert main([*argv, "--devices", "all"]) == 2
    assert "--devices cannot change on --resume" in capsys.readouterr().err


#: Small settings under which each learner learns within 12 updates.
SMALL = {
    "dqn": dict(learning_starts=30, buffer_size=200, batch_size=16),
    "pqn": dict(num_envs=8, num_minibatches=2),
    "sac": dict(num_envs=2, learning_starts=8, buffer_size=64, batch_size=16),
    "td3": dict(num_envs=2, learning_starts=8, buffer_size=64, batch_size=16),
    # A recurrent policy: its carry is checkpointed with the rollout state.
    "ppo-gru": dict(
        memory="gru", memory_size=8, num_steps=16, update_epochs=1, num_minibatches=1
    ),
}


@pytest.fixture
def fast_compiles():
    """Programs compiled without XLA's backend optimisation (a few times
    faster to build on CPU): equality holds at any level."""
    with _fast_compiles():
        yield


@pytest.mark.parametrize(
    "name",
    [
        # The resumes above and test_faults' damaged-checkpoint resumes hold
        # ppo's whole state equal after a resume: under slow.
        pytest.param("ppo", marks=pytest.mark.slow),
        "dqn",
        "sac",
        "ppo-gru",
        # The same checkpointed state and kit as ppo (a2c, pqn) and sac (td3),
        # each with its own fields: under slow.
        pytest.param("a2c", marks=pytest.mark.slow),
        pytest.param("pqn", marks=pytest.mark.slow),
        pytest.param("td3", marks=pytest.mark.slow),
    ],
)
def test_every_learner_resumes_to_the_same_numbers(name, tmp_path, fast_compiles):
    algorithm = get_algorithm(name.split("-")[0])
    extra = SMALL.get(name, {})
    per_update = algorithm.config(**extra).steps_per_update
    config = algorithm.config(total_timesteps=12 * per_update, hidden=(8,), **extra)
    whole = train_from_config(config, seed=3, num_segments=4, progress=False)

    def stop_after_first(done, steps, latest):
        raise KeyboardInterrupt

    out = tmp_path / "run"
    first = train_from_config(
        config, seed=3, out_dir=out, num_segments=4, progress=False,
        on_segment=stop_after_first,
    )  # fmt: skip
    assert first.interrupted and first.checkpoint == 3
    rest = resume_training(out, progress=False)
    assert rest.resumed_from == 3 and not rest.interrupted
    for key in whole.metrics:
        np.testing.assert_array_equal(rest.metrics[key], whole.metrics[key])
    a, b = jax.tree.leaves(rest.state), jax.tree.leaves(whole.state)
    for x, y in zip(a, b, strict=True):
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            x, y = jax.random.key_data(x), jax.random.key_data(y)
        np.testing.assert_array_equal(x, y)


def test_nan_guard_names_the_first_bad_update_and_keeps_the_good_checkpoint(tmp_path):
    # The reference's program (ARGS; or found in the suite's cache): two good
    # segments (checkpoints at updates 4 and 8), then the run resumed with a
    # learning rate that blows its parameters up on the first step: update
    # 10, inside the third segment, is the first with a non-finite loss.
    config = get_algorithm("ppo").config(
        total_timesteps=6144, num_envs=4, num_steps=32, update_epochs=1,
        num_minibatches=1, hidden=(8,),
    )  # fmt: skip
    out = tmp_path / "nan"

    def stop_after_two(updates, env_steps, latest):  # segments of 4 updates
        if updates == 8:
            raise KeyboardInterrupt

    first = train_from_config(
        config, out_dir=out, num_segments=12, progress=False, checkpoint_every=4,
        on_segment=stop_after_two,
    )  # fmt: skip
    assert first.interrupted and first.checkpoint == 8 and first.nonfinite is None
    info = json.loads((out / "config.json").read_text())
    info["hyperparams"]["learning_rate"] = 1e30
    (out / "config.json").write_text(json.dumps(info))

    result = resume_training(out, progress=False)
    assert result.nonfinite == "non-finite total_loss at update 10", result.nonfinite
    info = json.loads((out / "config.json").read_text())  # strict JSON
    assert info["status"] == "failed" and info["nonfinite"] == result.nonfinite
    with Checkpoints(out / "checkpoint") as checkpoints:
        assert checkpoints.steps() == [4, 8]  # the good ones, nothing after
    rows = read_metrics(out / "metrics.jsonl")
    assert [r["update"] for r in rows[:8]] == list(range(1, 9))
    assert all(np.isfinite(r["total_loss"]) for r in rows[:9])
    for line in (out / "metrics.jsonl").read_text().splitlines():
        json.loads(line, parse_constant=lambda c: pytest.fail(f"bare {c}"))


def test_output_directory_rules(tmp_path):
    config = get_algorithm("ppo").config(total_timesteps=512, hidden=(8,))
    out = tmp_path / "run"
    train_from_config(config, out_dir=out, progress=False)
    not_a_run = tmp_path / "notes"
    (not_a_run / "mine.txt").parent.mkdir()
    (not_a_run / "mine.txt").write_text("x")
    for where in (out, not_a_run):
        before = sorted(p.name for p in where.iterdir())
        with pytest.raises(RunDirError, match="holds an earlier run"):
            train_from_config(config, out_dir=where, progress=False)
        assert sorted(p.name for p in where.iterdir()) == before  # no .lock left
    again = train_from_config(config, out_dir=out, progress=False, force=True)
    assert len(read_metrics(out / "metrics.jsonl")) == again.config.num_updates
    (tmp_path / "file").write_text("x")
    with pytest.raises(RunDirError, match="is a file"):
        train_from_config(config, out_dir=tmp_path / "file", progress=False)
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    if os.geteuid() != 0:  # root may write anywhere
        with pytest.raises(RunDirError, match="cannot write"):
            train_from_config(config, out_dir=locked / "run", progress=False)


SWEEP = [
    "sweep", "--seeds", "2", "--learning-rate", "1e-3,3e-3,1e-2", "--hidden", "8",
    "--total-timesteps", "20480", "--chunk-size", "1", "--cpu-devices", "1",
    "--no-progress",
]  # fmt: skip


def _sweep(args, cache_dir):
    return subprocess.Popen(
        [sys.executable, "-c", CLI, *args],
        env=_env(cache_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _scores(out):
    rows = (out / "sweep.csv").read_text().splitlines()
    return sorted(rows[1:])


@pytest.mark.slow  # default: test_sweep's interrupt, test_faults' damaged chunk
def test_a_killed_sweep_keeps_its_chunks_and_resumes_the_rest(tmp_path):
    whole = _sweep([*SWEEP, "--out", str(tmp_path / "whole")], tmp_path / "cache")
    assert whole.wait(timeout=600) == 0, whole.stderr.read()
    out = tmp_path / "killed"
    proc = _sweep([*SWEEP, "--out", str(out)], tmp_path / "cache")
    start = time.time()
    while proc.poll() is None and time.time() - start < 300:
        if len(list((out / "members").glob("chunk-*.npz"))) >= 2:
            break
        time.sleep(0.05)
    proc.kill()
    proc.wait(timeout=60)
    kept = len(list((out / "members").glob("chunk-*.npz")))
    assert kept >= 2
    resumed = _sweep(
        ["sweep", "--resume", "--out", str(out), "--cpu-devices", "1", "--no-progress"],
        tmp_path / "cache",
    )
    assert resumed.wait(timeout=600) == 0, resumed.stderr.read()
    if kept < 6:
        assert f"{kept} member(s) already trained" in resumed.stderr.read()
    assert _scores(out) == _scores(tmp_path / "whole")
