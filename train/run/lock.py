"""One writer per run or sweep directory.

``DirLock(directory)`` holds an OS file lock (``fcntl.flock``) on
``directory/.lock`` while a process writes the directory; the file says which
host and process holds it. The kernel drops the lock when the process ends,
however it ends (``kill -9`` included), so no stale lock is ever left to
clear. A second writer is refused in one line (``DirInUse``) naming the
directory and the holder. Readers (``eval``, ``plot``, ``render``) take no
lock. The file itself stays (removing it would let two processes each lock
a different file of the same name).
"""

import fcntl
import os
import socket
import sys
from pathlib import Path

from ondevice_rl.train.run.artifacts import LOCK_FILE, RunDirArgError, RunDirError
from ondevice_rl.train.run.checks import literal


class DirInUse(RunDirError):
    """Another process holds the directory's lock."""


class DirLock:
    """``with DirLock(directory):`` (or ``acquire``/``release``): the lock,
    taken at once or refused (``DirInUse``); ``directory`` is created if
    missing (``RunDirArgError`` if that fails, naming it as ``flag`` does: a
    flag, or an argument's ``{keyword}`` field)."""

    def __init__(self, directory: str | Path, flag: str = "--out"):
        self.directory = Path(directory)
        self.flag = flag  # how errors name the directory's argument
        self._fd: int | None = None

    def acquire(self) -> "DirLock":
        path = self.directory / LOCK_FILE
        where = f"{self.flag} {literal(self.directory)}"
        if self.directory.exists() and not self.directory.is_dir():
            raise RunDirArgError(f"{where} is a file, not a directory")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            # Read-only once created: a process holding no file open for
            # writing lets its file system be remounted read-only under it.
            fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
        except OSError as e:
            raise RunDirArgError(
                f"{where}: cannot write there ({literal(e.strerror)})"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip()
            os.close(fd)
            raise DirInUse(
                f"{self.directory} is in use by {holder or 'another process'}; "
                "one process writes a directory at a time"
            ) from None
        except OSError as e:  # a file system without locks: go on, and say so
            os.close(fd)
            print(
                f"warning: cannot lock {self.directory} ({e.strerror}); a second "
                "writer would not be refused",
                file=sys.stderr,
            )
            return self
        self._fd = fd
        holder = f"host {socket.gethostname()} pid {os.getpid()}\n"
        try:
            path.write_text(holder)
        except OSError:
            pass  # a full disk: the lock holds all the same, unnamed
        return self

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing drops the lock

    def __enter__(self) -> "DirLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
