"""What a run does when its directory is damaged or a write fails.

* ``resume_point``: the newest checkpoint that verifies and holds the state
  ``config.json`` describes (checked on the stored shapes, before anything
  compiles), and the newer ones to skip; ``RunDirError`` in one line when
  there are checkpoints but none of them verifies, nothing moved.
* ``RunWriteError``: a write into the run directory failed (a full disk, a
  read-only directory) and stopped the run. Its one line says which file and
  why, where the run stopped, whether ``config.json`` could record the stop
  and where a resume starts (``failure``).
* ``set_aside``: the skipped checkpoints moved aside, noted in
  ``config.json``; ``save``: a checkpoint save whose failure, of whatever
  exception type orbax raises, is an ``OSError`` (``as_os_error``).
"""

import contextlib
import errno
import os
import re
from pathlib import Path
from typing import Any

import jax

from ondevice_rl.files.checkpoint import (
    CheckpointMismatch,
    Checkpoints,
    NoVerifiedCheckpoint,
    describe_skipped,
)
from ondevice_rl.train.run import artifacts
from ondevice_rl.train.run.run_files import DirectoryGone


class RunWriteError(OSError):
    """A write into the run directory failed and stopped the run; ``str``
    is one line saying what, where the run stopped and what was recorded."""

    def __init__(self, code: int | None, message: str):
        super().__init__(code, message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def resume_point(spec: Any, checkpoints: Checkpoints) -> tuple[int, list]:
    """``(update, skipped)``: the newest checkpoint that verifies and fits
    ``spec``'s train state (0 with no checkpoint at all) and, newest first,
    the newer ones that do not verify, each with why."""
    try:
        step, skipped = checkpoints.usable()
    except NoVerifiedCheckpoint as e:
        raise artifacts.RunDirError(str(e)) from None
    if step is not None:
        trainer, key = spec.trainer(), jax.random.key(spec.seed)
        env_params = spec.env_params_tree()
        shapes = jax.eval_shape(trainer.init, key, spec.hyperparams, env_params)
        try:
            checkpoints.check(step, shapes)
        except CheckpointMismatch as e:
            raise artifacts.RunDirError(
                f"{checkpoints.directory}: {e} as {artifacts.CONFIG_FILE} "
                "describes it; was the file edited?"
            ) from None
    return step or 0, skipped


def set_aside(checkpoints: Checkpoints, skipped: list, files: Any, done: int) -> str:
    """Moves the skipped checkpoints aside (before the run saves past them:
    nothing of theirs counts toward the newest kept) and records them with
    the resume in ``config.json``; the line that says so."""
    aside = checkpoints.set_aside([step for step, _ in skipped])
    files.note_resume(skipped=[f"{step}: {why}" for step, why in skipped])
    return (
        f"skipped {describe_skipped(skipped)}, moved to {aside}; resuming from "
        f"update {done}"
    )


def save(checkpoints: Checkpoints, step: int, state: Any) -> None:
    """``checkpoints.save``; a failure of any kind there is a failed write,
    raised as ``OSError`` naming the checkpoint."""
    try:
        checkpoints.save(step, state)
    except Exception as e:  # noqa: BLE001
        raise as_os_error(e, checkpoints.path(step)) from e


def where(error: OSError, out: Path | None) -> str:
    """``path (reason)`` of a failed write."""
    return f"{error.filename or out} ({error.strerror or error})"


def as_os_error(error: BaseException, path: Path) -> OSError:
    """The ``OSError`` behind ``error`` (its cause or context), else one
    made from its first line; for ``path``."""
    seen = error
    while seen is not None:
        if isinstance(seen, OSError):
            return OSError(seen.errno, seen.strerror or str(seen), str(path))
        seen = seen.__cause__ or seen.__context__
    text = str(error)
    code = re.search(r"os_error_code='(\d+)'", text)  # tensorstore's words
    if code:
        return OSError(int(code[1]), os.strerror(int(code[1])), str(path))
    first = (text.strip().splitlines() or [type(error).__name__])[0]
    code = errno.ENOSPC if "No space left" in first else errno.EIO
    return OSError(code, first[:200], str(path))


def failure(
    error: OSError, files: Any, status: dict, done: int, kept: int
) -> RunWriteError:
    """Records the stop in ``config.json`` (``status``, and ``reason``) if
    that write still succeeds; the error saying so. ``done``: the updates
    written; ``kept``: the last verified checkpoint (0: none)."""
    if isinstance(error, DirectoryGone):
        with contextlib.suppress(OSError):  # closes the logs; writes nothing
            files.finish(None, **status)
        return RunWriteError(
            error.errno,
            f"{files.out}: the run directory was removed or moved while the run "
            f"wrote to it: stopped after update {done}, nothing written in its "
            f"place; if it was moved, resume it where it is now with --resume "
            f"(from {f'update {kept}' if kept else 'the start'})",
        )
    reason = f"cannot write {where(error, files.out)}"
    try:
        files.finish(None, **status, reason=reason)
        recorded = f"{artifacts.CONFIG_FILE} records the stop"
    except OSError:
        recorded = f"{artifacts.CONFIG_FILE} could not record the stop either"
    start = f"from update {kept}" if kept else "from the start"
    return RunWriteError(
        error.errno,
        f"{reason}: stopped after update {done}; {recorded}; free space or "
        f"fix permissions, then resume {start} with --resume {files.out}",
    )
