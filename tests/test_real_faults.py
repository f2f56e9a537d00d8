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

import subprocess

import fault_runs
import pytest
from fault_runs import TRAIN, assert_same_as, spawn
from real_fs import MountRefused, tmpfs

from ondevice_rl.checkpoint import Checkpoints
from ondevice_rl.train.run.runner import resume_training

SAVE = "ondevice_rl.checkpoint:Checkpoints.save"
INJECTED = "test_a_failed_write_stops_in_one_line_and_a_resume_ends_equal"


@pytest.fixture
def mount(tmp_path):
    """A 4 MB tmpfs at ``tmp_path/mnt``, unmounted after the test."""
    try:
        with tmpfs(tmp_path / "mnt", "4m") as path:
            yield path
    except MountRefused as e:
        pytest.skip(f"cannot mount a tmpfs ({e}); {INJECTED} injects these faults")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
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
    with tmpfs(readonly, "4m"):
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


def test_a_run_directory_removed_or_moved_mid_run_is_not_made_again(reference, mount):
    removed, moved = mount / "removed", mount / "moved"
    procs = {
        out: spawn([*TRAIN, "--out", str(out)], real=(SAVE, 1, how, out))
        for out, how in ((removed, "remove"), (moved, "move"))
    }
    for out, proc in procs.items():
        line = _only_line(proc, f"{out}: the run directory was removed or moved")
        assert "stopped after update 2" in line and "--resume" in line
        assert not out.exists()  # nothing written in its place
    there = moved.with_name("moved.moved")
    assert_same_as(reference, there, resume_training(there, progress=False).state)
