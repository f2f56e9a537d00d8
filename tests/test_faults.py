"""Damaged run directories, two writers on one directory, a full disk: the
run falls back to what verifies, refuses in one line, explains, and a
resume still ends equal to the uninterrupted run.

One tiny PPO run (8 updates in segments of 2, a checkpoint every 2: 4, 6
and 8 kept) is trained once in this process; each test damages a copy of
it. Faults that need a process of their own (a full disk, a read-only
directory, a lock holder, library threads at exit) run the CLI in a
subprocess; faults are injected there (``tests/fault_injection.py``), so
the tests run, as root too, and never skip.
"""

import errno
import hashlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import fault_injection
import fault_runs
import numpy as np
import pytest
from fault_runs import TRAIN
from fault_runs import assert_same_as as _assert_same_as
from fault_runs import one_line_error as _one_line_error
from fault_runs import spawn as _spawn
from fault_runs import train_tiny as _train

from ondevice_rl.files import checksums
from ondevice_rl.files.checkpoint import Checkpoints
from ondevice_rl.train.cli import main
from ondevice_rl.train.run.artifacts import RunDirError, read_metrics, truncate_metrics
from ondevice_rl.train.run.lock import DirInUse, DirLock
from ondevice_rl.train.run.runner import (
    RunWriteError,
    resume_training,
)
from ondevice_rl.train.sweep.request import save_request

# Its module-scoped programs are built once: its tests share one xdist worker.
pytestmark = pytest.mark.xdist_group("faults")

HOLD = (
    "import sys, time; from ondevice_rl.train.run.lock import DirLock; "
    "DirLock(sys.argv[1]).acquire(); print('held', flush=True); time.sleep(600)"
)


@pytest.fixture(scope="module")
def reference(tmp_path_factory, suite_cache):
    """The uninterrupted run's directory, rows and final state."""
    return fault_runs.reference(tmp_path_factory)


@pytest.fixture
def run_dir(reference, tmp_path):
    """A fresh copy of the reference run to damage."""
    out = tmp_path / "run"
    shutil.copytree(reference[0], out, ignore=shutil.ignore_patterns(".lock"))
    return out


def _largest_file(step_dir: Path) -> Path:
    files = [p for p in step_dir.rglob("*") if p.is_file()]
    files = [p for p in files if p.name != checksums.CHECKSUM_FILE]
    return max(files, key=lambda p: p.stat().st_size)


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    else:  # flip one byte in the middle (of a zip: of its largest member's data)
        i = _middle_of_largest_member(path) if zipfile.is_zipfile(path) else None
        i = len(data) // 2 if i is None else i
        path.write_bytes(data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1 :])


def _middle_of_largest_member(path: Path) -> int:
    """The offset of the middle byte of a zip's largest stored member: a
    byte its CRC covers (the middle of the file may fall on a header's
    timestamp, which no reader checks and no reader needs)."""
    with zipfile.ZipFile(path) as archive:
        info = max(archive.infolist(), key=lambda i: i.compress_size)
    with open(path, "rb") as f:
        f.seek(info.header_offset + 26)  # the local header's two name lengths
        name_len, extra_len = struct.unpack("<HH", f.read(4))
    start = info.header_offset + 30 + name_len + extra_len
    return start + info.compress_size // 2


def _snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


# Checkpoints: verified, not trusted.


@pytest.mark.parametrize("how", ["truncate", "empty", "flip"])
def test_a_damaged_checkpoint_does_not_verify_and_says_why(how, tmp_path):
    state = {"w": np.arange(4096, dtype=np.float32), "b": np.ones(3, np.float32)}
    with Checkpoints(tmp_path, keep=3) as checkpoints:
        for step in (2, 4):
            checkpoints.save(step, state)
        assert checkpoints.verified() == (4, [])
        _damage(_largest_file(checkpoints.path(4)), how)
        step, skipped = checkpoints.verified()
    assert step == 2 and [s for s, _ in skipped] == [4]
    why = {"flip": "differs from its checksum", "empty": "is 0 bytes"}
    assert why.get(how, "bytes, ") in skipped[0][1]


@pytest.mark.parametrize(
    "how, damaged",
    [("truncate", [8]), ("empty", [8]), ("flip", [8]), ("flip", [8, 6])],
)
def test_resume_skips_damaged_checkpoints_and_ends_equal(
    how, damaged, run_dir, reference, capsys
):
    for step in damaged:
        _damage(_largest_file(run_dir / "checkpoint" / str(step)), how)
    result = resume_training(run_dir, progress=False, checkpoint_every=2)
    newest = 8 - 2 * len(damaged)
    assert result.resumed_from == newest
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("skipped checkpoint 8 (")
    assert f"resuming from update {newest}" in err[0]
    aside = run_dir / "checkpoint.damaged"
    assert sorted(int(p.name) for p in aside.iterdir()) == sorted(damaged)
    # Moved aside before saving past them; the one resumed from is kept.
    with Checkpoints(run_dir / "checkpoint") as checkpoints:
        assert checkpoints.steps() == [4, 6, 8]
    _assert_same_as(reference, run_dir, result.state)
    resumes = json.loads((run_dir / "config.json").read_text())["resumes"]
    assert resumes[-1]["from_update"] == newest
    assert [s.split(":")[0] for s in resumes[-1]["skipped"]] == list(map(str, damaged))


def test_eval_and_load_policy_take_the_newest_verified_checkpoint(run_dir, capsys):
    from ondevice_rl.train.use.loading import load_run
    from ondevice_rl.train.use.policy import load_policy

    before = _snapshot(run_dir / "checkpoint")
    _damage(_largest_file(run_dir / "checkpoint" / "8"), "flip")
    assert main(["eval", str(run_dir), "--episodes", "4"]) == 0
    out, err = capsys.readouterr()
    assert "checkpoint at update 6" in out
    assert err.count("\n") == 1 and "skipped checkpoint 8 (" in err
    assert "differs from its checksum); using checkpoint 6" in err
    assert load_policy(run_dir).step == 6
    assert capsys.readouterr().err.count("skipped checkpoint 8 (") == 1
    notes = []
    assert load_run(run_dir, notify=notes.append).step == 6
    assert len(notes) == 1 and "skipped checkpoint 8 (" in notes[0]
    after = _snapshot(run_dir / "checkpoint")
    assert set(after) == set(before) and not (run_dir / "checkpoint.damaged").exists()


def test_none_verifies_one_line_exit_2_nothing_moved(run_dir, tmp_path, capsys):
    for step in (4, 6, 8):
        _damage(_largest_file(run_dir / "checkpoint" / str(step)), "truncate")
    empty = tmp_path / "no-checkpoint"  # stopped before its first checkpoint
    shutil.copytree(run_dir, empty)
    shutil.rmtree(empty / "checkpoint")
    before = _snapshot(run_dir)
    procs = [
        _spawn(["train", "--resume", str(run_dir), "--no-progress"], tmp_path),
        _spawn(["eval", str(empty)], tmp_path),
    ]
    assert main(["eval", str(run_dir)]) == 2
    errs = [capsys.readouterr().err]
    for proc in procs:
        assert proc.wait(timeout=300) == 2
        errs.append(proc.stderr.read())
    for err in errs:
        assert err.count("\n") == 1, err  # no library noise after ours
    for err, command in zip(errs[:2], ["eval", "train"], strict=True):
        needles = (str(run_dir / "checkpoint"), "no checkpoint verifies: checkpoint 8")
        _one_line_error(err, command, *needles, "nothing was moved or deleted")
    _one_line_error(errs[2], "eval", "no checkpoint yet")
    after = _snapshot(run_dir)
    after.pop(".lock")  # the refused resume's lock, released: no run data
    assert after == before


# Every file through one validating reader.


def _edit_config(run_dir, change):
    path = run_dir / "config.json"
    info = json.loads(path.read_text())
    change(info)
    path.write_text(json.dumps(info))


@pytest.mark.parametrize(
    "change, needle",
    [
        ("[1, 2]", "config.json: not a JSON object"),
        ('{"algo": "ppo",', "config.json: not valid JSON"),
        (lambda i: i.update(segment_length=0), "segment_length must be a positive"),
        (lambda i: i.update(segment_length=-3), "segment_length must be a positive"),
        (lambda i: i.update(seed="3"), "seed must be in [0, 2^32)"),
        (lambda i: i.update(algo="ppo2"), "unknown algorithm 'ppo2'"),
        (lambda i: i.pop("config"), "no 'config' field"),
        (lambda i: i["config"].update(env="CartPole-v9"), "unknown environment"),
        (lambda i: i["config"].update(hidden=[16]), "holds params/params/actor"),
        (lambda i: i["hyperparams"].update(gamma="x"), "gamma"),
    ],
)
def test_a_damaged_config_json_is_one_line_exit_2(change, needle, run_dir, capsys):
    if isinstance(change, str):
        (run_dir / "config.json").write_text(change)
    else:
        _edit_config(run_dir, change)
    resume = ["train", "--resume", str(run_dir), "--no-progress"]
    for argv in (resume, ["eval", str(run_dir)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err
        _one_line_error(err, argv[0], needle)


def test_a_bad_metrics_line_is_named_plot_skips_it(
    run_dir, reference, capsys, tmp_path
):
    path = run_dir / "metrics.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:2] + ["{not json\n"] + lines[3:]))
    assert main(["train", "--resume", str(run_dir), "--no-progress"]) == 2
    _one_line_error(capsys.readouterr().err, "train", f"{path}, line 3: not JSON")
    png = tmp_path / "curves.png"
    assert main(["plot", str(run_dir), "--out", str(png)]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"warning: {path}, line 3: not JSON" in err
    assert "skipped" in err and png.is_file()


def test_metrics_rows_are_keyed_by_update(tmp_path):
    path = tmp_path / "metrics.jsonl"
    row = lambda u, r: json.dumps({"update": u, "env_steps": u, "r": r}) + "\n"  # noqa: E731
    path.write_text(row(2, 2.0) + row(1, 1.0) + row(3, 3.0) + row(2, 2.5) + '{"upd')
    rows = read_metrics(path)  # a torn last line dropped, a later row wins
    assert [(r["update"], r["r"]) for r in rows] == [(1, 1.0), (2, 2.5), (3, 3.0)]
    assert [r["update"] for r in truncate_metrics(path, 2)] == [1, 2]
    assert [r["update"] for r in read_metrics(path)] == [1, 2]
    with pytest.raises(RunDirError, match="ends at update 2, not at the update 3"):
        truncate_metrics(path, 3)
    path.write_text(row(1, 1.0) + json.dumps({"update": 0}) + "\n" + row(2, 2.0))
    with pytest.raises(RunDirError, match=r"line 2: update must be a positive"):
        read_metrics(path)


# One writer per directory.


def test_a_second_writer_is_refused_and_kill_9_leaves_no_lock(run_dir, capsys):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(run_dir)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline() == "held\n"
        assert main(["train", "--resume", str(run_dir), "--no-progress"]) == 2
        who = f"host {socket.gethostname()} pid {holder.pid}"
        _one_line_error(capsys.readouterr().err, "train", str(run_dir), who)
        with pytest.raises(DirInUse, match=who):
            resume_training(run_dir, progress=False)
        with pytest.raises(DirInUse):
            _train(run_dir, force=True)  # nor replaced under it
        assert read_metrics(run_dir / "metrics.jsonl")  # readers take no lock
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=60)
    with DirLock(run_dir):  # the kernel dropped the lock with the process
        pass
    assert resume_training(run_dir, progress=False).resumed_from == 8


# Every argument given beside --resume, compared with the stored run.


def test_resume_refuses_a_changed_program_and_records_an_extension(run_dir, capsys):
    argv = ["train", "--resume", str(run_dir), "--no-progress"]
    for flags, needle in [
        (["--algo", "dqn"], "--algo dqn would change the program"),
        (["--hidden", "16"], "--hidden (16,) would change the program"),
        (["--seed", "4"], "--seed 4 differs from the run's (3)"),
    ]:
        assert main([*argv, *flags]) == 2
        _one_line_error(capsys.readouterr().err, "train", needle)
    assert main([*argv, "--hidden", "8", "--total-timesteps", "5120"]) == 0
    info = json.loads((run_dir / "config.json").read_text())
    assert info["config"]["total_timesteps"] == 5120 and info["updates"] == 10
    assert info["resumes"][-1] == {"from_update": 8, "total_timesteps": 5120}


def test_sweep_resume_refuses_changed_flags(tmp_path, capsys):
    out = tmp_path / "sweep"
    out.mkdir()
    request = {
        "algo": "ppo", "env": "CartPole-v1", "seeds": 2,
        "search": {"learning_rate": [0.001, 0.003], "hidden": [(8,)]},
        "env_params": {}, "samples": None, "sample_seed": 0, "chunk_size": 1,
    }  # fmt: skip
    save_request(out, request)
    argv = ["sweep", "--resume", "--out", str(out), "--no-progress"]
    for flags, needle in [
        (["--seeds", "3"], "--seeds [0, 1, 2] would change the sweep"),
        (["--env", "Acrobot-v1"], "--env Acrobot-v1 would change the sweep"),
        (["--algo", "a2c"], "--algo a2c would change the sweep"),
        (["--learning-rate", "0.001"], "--learning-rate [0.001] would change"),
        (["--hidden", "16"], "--hidden [[16]] would change the sweep"),
        (["--chunk-size", "2"], "--chunk-size 2 would change the sweep"),
    ]:
        assert main([*argv, *flags]) == 2
        _one_line_error(capsys.readouterr().err, "sweep", needle)
    (out / "sweep.json").write_text('{"algo": "ppo", "env": 3}')
    assert main(argv) == 2
    _one_line_error(capsys.readouterr().err, "sweep", "sweep.json: env must be")


# A full disk, a read-only directory.


def test_a_failed_write_stops_in_one_line_and_a_resume_ends_equal(reference, tmp_path):
    out = tmp_path / "metrics-only"  # the disk fills while appending rows
    undo = fault_injection.install(out, errno.ENOSPC, 1_500, "metrics.jsonl")
    try:
        with pytest.raises(RunWriteError) as failed:
            _train(out)
    finally:
        undo()
    line = str(failed.value)
    assert failed.value.errno == errno.ENOSPC and "\n" not in line
    assert f"cannot write {out / 'metrics.jsonl'} (No space left on device)" in line
    assert "config.json records the stop" in line
    info = json.loads((out / "config.json").read_text())
    assert info["status"] == "failed" and info["reason"] in line
    _assert_same_as(reference, out, resume_training(out, progress=False).state)


@pytest.mark.slow  # ~8 s: two CLI processes. test_real_faults.py fills a real
# tmpfs and remounts one read-only under the CLI in the default suite.
def test_a_directory_that_fails_every_write_stops_in_one_line(reference, tmp_path):
    cases = {"full": "ENOSPC", "read-only": "EROFS"}  # of the whole directory
    procs = {}
    for name, code in cases.items():
        out = tmp_path / name
        fault = (out, code, 30_000)  # bytes written before the fault
        procs[name] = _spawn([*TRAIN, "--out", str(out)], fault=fault)
    for name, proc in procs.items():
        assert proc.wait(timeout=300) == 1, proc.stderr.read()
        out = tmp_path / name
        reason = os.strerror(getattr(errno, cases[name]))
        line = _one_line_error(proc.stderr.read(), "train", f"({reason})")
        assert "config.json could not record the stop either" in line
        assert f"--resume {out}" in line
        assert json.loads((out / "config.json").read_text())["status"] == "running"
        _assert_same_as(reference, out, resume_training(out, progress=False).state)


# Sweeps.


def test_a_damaged_sweep_chunk_is_moved_aside_and_retrained(tmp_path, capsys):
    out = tmp_path / "sweep"
    argv = [
        "sweep", "--seeds", "2", "--learning-rate", "1e-3,3e-3", "--hidden", "8",
        "--total-timesteps", "2048", "--chunk-size", "1", "--cpu-devices", "1",
        "--no-progress", "--out", str(out),
    ]  # fmt: skip
    assert main(argv) == 0
    whole = (out / "sweep.csv").read_text()
    chunk = out / "members" / "chunk-2-1.npz"
    _damage(chunk, "truncate")
    capsys.readouterr()
    assert main(["sweep", "--resume", "--out", str(out), "--no-progress"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"{chunk}: damaged (") and "train again" in err[0]
    assert "resuming: 3 member(s) already trained" in err
    assert (out / "members" / "damaged" / chunk.name).is_file()
    assert (out / "sweep.csv").read_text() == whole
    # A chunk whose members' parameters are lost or damaged trains again too.
    (out / "members" / "params-1-1.npz").unlink()
    _damage(out / "members" / "params-3-1.npz", "flip")
    assert main(["sweep", "--resume", "--out", str(out), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "chunk-1-1.npz: damaged (no parameters kept for member 1)" in err
    assert "params-3-1.npz: damaged" in err and "resuming: 2 member(s)" in err
    assert (out / "sweep.csv").read_text() == whole
    assert len(list((out / "members").glob("params-*.npz"))) == 4
    _damage(out / "curves.npz", "flip")
    assert main(["plot", str(out), "--out", str(tmp_path / "c.png")]) == 2
    _one_line_error(capsys.readouterr().err, "plot", "curves.npz: damaged")
    full = tmp_path / "full"  # the disk fills after the first chunk
    undo = fault_injection.install(full, errno.ENOSPC, 2_000)
    try:
        assert main([*argv[:-1], str(full)]) == 1
    finally:
        undo()
    _one_line_error(capsys.readouterr().err, "sweep", "(No space left on device)")
    assert main(["sweep", "--resume", "--out", str(full), "--no-progress"]) == 0
    assert (full / "sweep.csv").read_text() == whole
    assert not list((full / "members").glob(".tmp*"))


# Long variants.


@pytest.mark.slow
def test_two_real_trainings_on_one_directory(tmp_path):
    out = tmp_path / "run"
    args = [*TRAIN, "--out", str(out)]
    args[args.index("--total-timesteps") + 1] = "409600"  # 800 updates
    first = _spawn(args, tmp_path / "cache")
    start = time.time()
    while not (out / "metrics.jsonl").is_file() and time.time() - start < 300:
        time.sleep(0.1)
    second = _spawn(["train", "--resume", str(out), "--no-progress"], tmp_path)
    assert second.wait(timeout=300) == 2
    _one_line_error(second.stderr.read(), "train", f"pid {first.pid}")
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=60)
    again = _spawn(["train", "--resume", str(out), "--no-progress"], tmp_path)
    assert again.wait(timeout=900) == 0, again.stderr.read()
    lines = (out / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["update"] for line in lines] == list(range(1, 801))
