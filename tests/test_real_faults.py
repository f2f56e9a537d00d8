"""Real faults on a real file system: a tmpfs that fills up, one remounted
read-only, a run directory removed or moved, all mid-run.

Each test mounts a tmpfs (root only; CI runs as root) and runs the CLI in a
subprocess through ``tests/real_fs.py``, which does the deed right after a
set call returns (the first checkpoint, the first sweep chunk): the
errors then come from the kernel, inside orbax's and tensorstore's threads
as much as in ours. Where mounting is refused the tests skip and say which
injected-fault test holds the same case (``tests/test_faults.py``).

Checked: exit status 1, stderr exactly one line naming the file and what
to do, the newest verified checkpoint intact, nothing made in a vanished
directory's place, and a resume after the fault is gone ending bitwise
equal to the uninterrupted run.
"""

import contextlib
import shutil
import signal
import subprocess
import time

import fault_runs
import pytest
import real_fs
from fault_runs import TRAIN, assert_same_as, spawn
from real_fs import MountRefused, tmpfs

from ondevice_rl.files.checkpoint import Checkpoints
from ondevice_rl.train.run.runner import resume_training

# Its module-scoped programs are built once: its tests share one xdist worker.
pytestmark = pytest.mark.xdist_group("real_faults")

SAVE = "ondevice_rl.files.checkpoint:Checkpoints.save"
INJECTED = "test_a_failed_write_stops_in_one_line_and_a_resume_ends_equal"


@contextlib.contextmanager
def mounted(path, size):
    """``real_fs.tmpfs``, or the test skipped (naming the injected-fault
    test that holds the case) where mounting is refused."""
    mount = tmpfs(path, size)
    try:
        where = mount.__enter__()
    except MountRefused as e:
        pytest.skip(f"cannot mount a tmpfs ({e}); {INJECTED} injects these faults")
    try:
        yield where
    finally:
        mount.__exit__(None, None, None)


@pytest.fixture
def mount(tmp_path):
    """A 4 MB tmpfs at ``tmp_path/mnt``, unmounted after the test."""
    with mounted(tmp_path / "mnt", "4m") as path:
        yield path


@pytest.fixture(scope="module")
def reference(tmp_path_factory, suite_cache):
    return fault_runs.reference(tmp_path_factory)


def _only_line(proc, *needles: str) -> str:
    """The process ended with exit status 1 and one line on stderr, ours."""
    assert proc.wait(timeout=300) == 1, proc.stderr.read()
    err = proc.stderr.read()
    assert len(err.strip().splitlines()) == 1, err
    return fault_runs.one_line_error(err, "train", *needles)


def _newest_verified(out) -> int | None:
    with Checkpoints(out / "checkpoint") as checkpoints:
        return checkpoints.verified()[0]


def test_a_real_full_disk_and_read_only_remount_stop_in_one_line(
    reference, mount, tmp_path
):
    full, readonly = mount / "full", tmp_path / "ro"
    # The disk fills after the first checkpoint with 32 KB left: the next
    # rows fit, the next checkpoint does not (it fails in orbax's threads).
    fill = spawn([*TRAIN, "--out", str(full)], real=(SAVE, 1, "fill", mount, 32_768))
    with mounted(readonly, "4m"):
        remount = spawn(
            [*TRAIN, "--out", str(readonly / "run")],
            real=(SAVE, 1, "readonly", readonly),
        )
        line = _only_line(remount, "(Read-only file system)", "--resume")
        assert f"cannot write {readonly / 'run' / 'config.json'} " in line
        assert _newest_verified(readonly / "run") == 4 - 2
        subprocess.run(["mount", "-o", "remount,rw", str(readonly)], check=True)
        state = resume_training(readonly / "run", progress=False).state
        assert_same_as(reference, readonly / "run", state)
    line = _only_line(fill, "(No space left on device)", "config.json records the stop")
    assert f"cannot write {full / 'checkpoint' / '4'} " in line
    assert "resume from update 2 with --resume" in line
    assert _newest_verified(full) == 2
    assert not list((full / "checkpoint").glob("*.orbax-checkpoint-tmp*"))
    (mount / "filler").unlink()
    assert_same_as(reference, full, resume_training(full, progress=False).state)


@pytest.mark.parametrize(
    "how",
    [
        "move",
        # The same check (the directory is no longer the one the run opened)
        # and message as a move, which the default case holds: under slow.
        pytest.param("remove", marks=pytest.mark.slow),
    ],
)
def test_a_run_directory_removed_or_moved_mid_run_is_not_made_again(
    how, reference, mount
):
    out = mount / f"{how}d"
    proc = spawn([*TRAIN, "--out", str(out)], real=(SAVE, 1, how, out))
    line = _only_line(proc, f"{out}: the run directory was removed or moved")
    assert "stopped after update 2" in line and "--resume" in line
    assert not out.exists()  # nothing written in its place
    if how == "move":
        there = out.with_name("moved.moved")
        assert_same_as(reference, there, resume_training(there, progress=False).state)


# Under make test-slow: every other write path.

SWEEP = [
    "sweep", "--seeds", "2", "--learning-rate", "1e-3,3e-3", "--hidden", "8",
    "--total-timesteps", "2048", "--chunk-size", "1", "--cpu-devices", "1",
    "--no-progress",
]  # fmt: skip
SEARCH = [
    "sweep", "--strategy", "pbt", "--seeds", "2", "--samples", "4",
    "--learning-rate", "loguniform:1e-4:1e-2", "--total-timesteps", "6400",
    "--num-envs", "4", "--num-steps", "16", "--update-epochs", "1",
    "--num-minibatches", "1", "--hidden", "16", "--round-updates", "2",
    "--score-episodes", "8", "--cpu-devices", "1", "--no-progress",
]  # fmt: skip
CHUNK = "ondevice_rl.train.sweep.store:save_metrics"
ROUND = "ondevice_rl.train.sweep.checkpoints:save_round"


def _outputs(out):
    """What a sweep leaves that must not differ: its table, its curves."""
    return (out / "sweep.csv").read_text(), (out / "curves.npz").read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv, after", [(SWEEP, CHUNK), (SEARCH, ROUND)], ids=["sweep", "search"]
)
def test_a_sweep_stopped_by_a_real_fault_resumes_equal(argv, after, mount, tmp_path):
    from ondevice_rl.train.cli import main

    assert main([*argv, "--out", str(tmp_path / "whole")]) == 0
    whole = _outputs(tmp_path / "whole")
    with mounted(tmp_path / "ro", "4m") as ro:
        procs = {
            mount / "sweep": spawn(
                [*argv, "--out", str(mount / "sweep")],
                real=(after, 1, "fill", mount, 0),
            ),
            ro / "sweep": spawn(
                [*argv, "--out", str(ro / "sweep")], real=(after, 1, "readonly", ro)
            ),
        }
        for out, proc in procs.items():
            assert proc.wait(timeout=600) == 1, proc.stderr.read()
            err = proc.stderr.read()
            assert len(err.strip().splitlines()) == 1, err
            line = fault_runs.one_line_error(err, "sweep", f"--resume --out {out}")
            assert f"cannot write {out}/" in line
        (mount / "filler").unlink()
        subprocess.run(["mount", "-o", "remount,rw", str(ro)], check=True)
        for out in procs:
            assert main(["sweep", "--resume", "--out", str(out), "--no-progress"]) == 0
            assert _outputs(out) == whole


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["full", "read-only"])
def test_eval_render_export_plot_on_a_real_fault_say_which_file(
    reference, fault, tmp_path, capsys
):
    from ondevice_rl.train.cli import main

    with mounted(tmp_path / "mnt", "4m") as mnt:
        run = mnt / "run"
        shutil.copytree(reference[0], run, ignore=shutil.ignore_patterns(".lock"))
        before = sorted(p.name for p in run.iterdir())
        if fault == "full":
            real_fs.fill(mnt, 0)
        else:
            subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        reason = "No space left on device" if fault == "full" else "Read-only file"
        for argv, path in [
            (["eval", str(run), "--episodes", "2"], run / "eval.json"),
            (["render", str(run)], run / "episode.gif"),
            (["export", str(run)], run / "policy.bin"),
            (["plot", str(run), "--out", str(mnt / "c.png")], mnt / "c.png"),
        ]:
            capsys.readouterr()
            assert main(argv) == 1, argv
            err = capsys.readouterr().err
            assert len(err.strip().splitlines()) == 1, err
            fault_runs.one_line_error(err, argv[0], f"cannot write {path} ({reason}")
        assert sorted(p.name for p in run.iterdir()) == before  # no half file
        assert not (mnt / "c.png").exists()


@pytest.mark.slow
def test_a_compile_cache_that_cannot_be_written_costs_one_line(tmp_path):
    out = tmp_path / "runs"
    with (
        mounted(tmp_path / "full", "64k") as full,
        mounted(tmp_path / "ro", "64k") as ro,
    ):
        real_fs.fill(full, 0)
        subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
        procs = {
            reason: spawn([*TRAIN, "--out", str(out / name)], cache=cache / "jax")
            for name, cache, reason in (
                ("full", full, "No space left on device"),
                ("ro", ro, "Read-only file system"),
            )
        }
        for reason, proc in procs.items():
            assert proc.wait(timeout=300) == 0, proc.stderr.read()
            lines = proc.stderr.read().strip().splitlines()
            assert len(lines) == 1 and "compile cache" in lines[0], lines
            assert f"({reason}); going on without it" in lines[0]
    for name in ("full", "ro"):
        assert (out / name / "checkpoint" / "8").is_dir()


@pytest.mark.slow
def test_a_compile_cache_filling_up_mid_run_costs_one_line(tmp_path):
    with mounted(tmp_path / "small", "64k") as small:  # fills with the first entry
        proc = spawn([*TRAIN, "--out", str(tmp_path / "run")], cache=small / "jax")
        assert proc.wait(timeout=300) == 0, proc.stderr.read()
        lines = proc.stderr.read().strip().splitlines()
        assert lines == [
            f"ondevice-rl: warning: cannot write the compile cache {small / 'jax'} "
            "(No space left on device); going on without it"
        ]
        # What it left cut short is read as damaged and compiled again.
        proc = spawn([*TRAIN, "--out", str(tmp_path / "again")], cache=small / "jax")
        assert proc.wait(timeout=300) == 0, proc.stderr.read()
        lines = proc.stderr.read().strip().splitlines()
        assert any("holds a damaged entry" in x for x in lines), lines
        assert all("damaged entry" in x or "cannot write" in x for x in lines), lines


@pytest.mark.slow
def test_wandb_failing_on_a_full_disk_leaves_the_run_whole(reference, tmp_path):
    pytest.importorskip("wandb")
    with mounted(tmp_path / "wandb", "64k") as folder:
        real_fs.fill(folder, 0)
        proc = spawn(
            [*TRAIN, "--wandb", "faults", "--out", str(tmp_path / "run")],
            env=dict(WANDB_MODE="offline", WANDB_DIR=str(folder), WANDB_SILENT="true"),
        )
        assert proc.wait(timeout=300) == 0, proc.stderr.read()
        ours = [
            line
            for line in proc.stderr.read().splitlines()
            if line.startswith("ondevice-rl")
        ]
    assert len(ours) == 1 and "W&B stopped" in ours[0], ours
    assert "its own files unaffected" in ours[0]
    assert_same_as(reference, tmp_path / "run")


@pytest.mark.slow
def test_a_crowded_machine_on_one_cold_cache_gives_the_runs_made_alone(
    reference, tmp_path
):
    from ondevice_rl.train.cli import main

    assert main([*SWEEP, "--out", str(tmp_path / "alone")]) == 0
    cache = tmp_path / "cache"  # cold
    trains = {
        tmp_path / f"train-{i}": spawn(
            [*TRAIN, "--out", str(tmp_path / f"train-{i}")], cache=cache
        )
        for i in range(4)
    }
    sweep = spawn([*SWEEP, "--out", str(tmp_path / "sweep")], cache=cache)
    victims = [
        spawn([*TRAIN, "--out", str(tmp_path / f"killed-{i}")], cache=cache)
        for i in range(3)
    ]
    for victim in victims:  # killed as the cache starts to fill
        while not (cache.is_dir() and any(cache.iterdir())) and victim.poll() is None:
            time.sleep(0.05)
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=60)
        time.sleep(0.3)
    for out, proc in trains.items():
        assert proc.wait(timeout=900) == 0, proc.stderr.read()
        assert_same_as(reference, out)
    assert sweep.wait(timeout=900) == 0, sweep.stderr.read()
    assert _outputs(tmp_path / "sweep") == _outputs(tmp_path / "alone")
    # An entry cut short, as a kill mid-write leaves it: the next process
    # reads it as damaged, compiles again, and ends the same.
    entry = max(cache.glob("jit_segment-*"), key=lambda p: p.stat().st_size)
    entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])
    after = spawn([*TRAIN, "--out", str(tmp_path / "after")], cache=cache)
    assert after.wait(timeout=600) == 0, after.stderr.read()
    lines = after.stderr.read().strip().splitlines()
    assert lines and all("holds a damaged entry for jit_segment" in x for x in lines)
    assert_same_as(reference, tmp_path / "after")
