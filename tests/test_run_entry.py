"""``ondevice_rl.run_training``: the train command as a call. Every run kept
in a new directory, ``out=None`` writing nothing, a short result, errors
naming the keywords; the CLI's run directory, progress lines without a
terminal and the compilation cache, in a real subprocess."""

import datetime
import json
import os
import pathlib
import re
import subprocess
import sys

import chex
import pytest

import ondevice_rl
from ondevice_rl.train.cli import main
from ondevice_rl.train.run import request
from ondevice_rl.train.run.entry import new_run_dir
from ondevice_rl.train.run.run_spec import RunSpec

# test_log_rows' tiny run (24 updates of 2 x 8 steps in 12 segments): its
# programs are reused when both files run in one process.
RUN = dict(
    env="CartPole-v1",
    total_timesteps=384,
    num_envs=2,
    num_steps=8,
    hidden=(8,),
    update_epochs=1,
    num_minibatches=1,
    seed=1,
    segments=12,
)
NAME = re.compile(r"CartPole-v1-ppo-s1-\d{8}-\d{6}")


@pytest.fixture(autouse=True)
def _quiet(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)


def test_every_run_is_kept_and_out_none_writes_nothing(tmp_path):
    result = ondevice_rl.run_training(**RUN, progress=False)
    assert result.out_dir.parent == pathlib.Path("runs")  # in the working dir
    assert NAME.fullmatch(result.out_dir.name), result.out_dir.name
    info = json.loads((result.out_dir / "config.json").read_text())
    assert info["status"] == "finished" and info["seed"] == 1
    assert int(result.state.update_step) == 24  # the whole state is on it
    text = repr(result)
    assert len(text.splitlines()) <= 6 and len(text) < 400, text
    assert str(result.out_dir) in text and "final_return=" in text

    again = ondevice_rl.run_training(**RUN, out=None, progress=False)
    assert again.out_dir is None
    assert os.listdir(tmp_path / "runs") == [result.out_dir.name]
    chex.assert_trees_all_equal(again.metrics, result.metrics)
    assert again.final_return == result.final_return


def test_run_directories_are_named_and_never_reused(tmp_path):
    now = datetime.datetime(2026, 1, 2, 3, 4, 5)
    names = [new_run_dir("gymnax/Breakout-MinAtar", "dqn", 7, tmp_path, now).name
             for _ in range(3)]  # fmt: skip
    base = "gymnax-Breakout-MinAtar-dqn-s7-20260102-030405"
    assert names == [base, f"{base}-2", f"{base}-3"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(segments=0), "^segments must be positive, got 0$"),
        (dict(seed=-1), r"^seed must be in \[0, 2\^32\), got -1$"),
        (dict(log_every=0), r"^log_every must be in \[1, 2\^31\), got 0$"),
        (dict(eval_episodes=3), "^eval_episodes needs eval_every$"),
        (dict(algo="ppo", recipe="cartpole_a2c"), "is for A2CConfig, not algo ppo"),
        (dict(num_envz=3), "run_training: unknown key.s. num_envz for ppo"),
        (dict(learning_rate=-1.0), "learning_rate=-1.0 is outside"),
        (dict(wandb=""), "^wandb must name a project"),
    ],
)
def test_bad_arguments_name_the_keyword_and_leave_nothing(kwargs, message, tmp_path):
    with pytest.raises(ValueError, match=message) as caught:
        ondevice_rl.run_training(**{**RUN, **kwargs}, progress=False)
    assert "--" not in str(caught.value)
    assert not (tmp_path / "runs").exists() or not os.listdir(tmp_path / "runs")


def test_a_refused_directory_names_out_and_force(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match=r"^out \S+file is a file, not a directory$"):
        ondevice_rl.run_training(**RUN, out=tmp_path / "file", progress=False)
    (tmp_path / "earlier").mkdir()
    (tmp_path / "earlier" / "config.json").write_text("{}")
    with pytest.raises(ValueError, match=r"resume_training continues it, force=True"):
        ondevice_rl.run_training(**RUN, out=tmp_path / "earlier", progress=False)
    assert main(["train", "--out", str(tmp_path / "file"), "--no-progress"]) == 2


def test_each_entry_checks_a_run_once(monkeypatch, tmp_path):
    """The CLI, ``run_training`` and ``train_from_config`` build and check a
    run's spec, and size its memory, once each."""
    calls = []

    def counted(name, fn):
        return lambda *args, **kwargs: calls.append(name) or fn(*args, **kwargs)

    create = RunSpec.create.__func__
    monkeypatch.setattr(RunSpec, "create", classmethod(counted("spec", create)))
    monkeypatch.setattr(request, "check_fits", counted("fits", request.check_fits))
    fits = counted("fits", request.check_programs_fit)
    monkeypatch.setattr(request, "check_programs_fit", fits)
    ondevice_rl.run_training(**RUN, out=None, progress=False)
    assert calls == ["spec", "fits"]
    flags = "--total-timesteps 384 --num-envs 2 --num-steps 8 --hidden 8 "
    flags += "--update-epochs 1 --num-minibatches 1 --seed 1 --segments 12"
    out = ["--out", str(tmp_path / "cli"), "--no-progress"]
    assert main(["train", *flags.split(), *out]) == 0
    assert calls == ["spec", "fits"] * 2


def test_cli_keeps_the_run_prints_progress_lines_and_caches_programs(tmp_path):
    """A real process whose stdout and stderr are pipes, as in a job's log."""
    env = dict(
        os.environ,
        ONDEVICE_RL_CACHE_DIR=str(tmp_path / "cache"),
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
    )
    argv = "--total-timesteps 64 --num-envs 2 --num-steps 8 --hidden 8 "
    argv += "--update-epochs 1 --num-minibatches 1 --segments 2"
    cli = "import sys; from ondevice_rl.train.cli import main; sys.exit(main())"
    done = subprocess.run(
        [sys.executable, "-c", cli, "train", *argv.split()],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    out = done.stdout.splitlines()
    assert out[0] == f"run directory: runs/{run_dir.name}"
    assert f"runs/{run_dir.name}/ (config.json" in out[-1]
    lines = [line for line in done.stderr.splitlines() if "steps/s" in line]
    assert [line.split(":")[1].split()[0] for line in lines] == ["32/64", "64/64"]
    assert all(re.search(r"return [\d.]+, ETA \d+:\d\d:\d\d$", x) for x in lines)
    assert (run_dir / "checkpoint").is_dir()
    assert any((tmp_path / "cache").iterdir())  # the compilation cache is on
