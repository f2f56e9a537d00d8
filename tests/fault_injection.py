"""A full disk or a read-only file system, on demand, inside one process.

The fault tests run as root on CI, where permissions do not stop writes, so
they inject the faults instead: ``python tests/fault_injection.py DIR
ERRNO BUDGET [FILE] -- ARGS...`` runs ``ondevice-rl ARGS`` with every
Python-level write below ``DIR`` counted, and once ``BUDGET`` bytes are
written:

* ``ENOSPC``: each further write fails as on a full disk (the write that
  crosses the budget writes what fits first: a torn line);
* ``EROFS``: so does every write, and every open for writing, rename,
  replace, mkdir and unlink below ``DIR``, as on a file system remounted
  read-only.

With ``FILE``, only writes to files of that name count and fail (the rest of
the directory stays writable). ``install(...)`` does the same in the
calling process and returns a function that undoes it. Writes that XLA,
tensorstore or the kernel make below Python are not seen; the point is what
the program does with the error, wherever it comes from.
"""

import builtins
import errno
import io
import os
import sys

_OS_CALLS = ("rename", "replace", "mkdir", "unlink", "remove", "rmdir")


class _Budget:
    def __init__(self, root: str, code: int, budget: int, name: str | None):
        self.root = os.path.realpath(root) + os.sep
        self.code, self.left, self.name = code, budget, name

    def covers(self, path) -> bool:
        try:
            real = os.path.realpath(os.fspath(path))
        except TypeError:  # a file descriptor
            return False
        if not real.startswith(self.root):
            return False
        return self.name is None or os.path.basename(real) == self.name

    @property
    def spent(self) -> bool:
        return self.left <= 0

    def fail(self, path) -> OSError:
        return OSError(self.code, os.strerror(self.code), os.fspath(path))


class _Writer:
    """A file object whose writes draw on the budget."""

    def __init__(self, file, path, budget: _Budget):
        self._file, self._path, self._budget = file, path, budget

    def write(self, data):
        budget = self._budget
        if budget.spent:
            raise budget.fail(self._path)
        if len(data) > budget.left:
            self._file.write(data[: budget.left])
            self._file.flush()
            budget.left = 0
            raise budget.fail(self._path)
        budget.left -= len(data)
        return self._file.write(data)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._file.__exit__(*exc)

    def __iter__(self):
        return iter(self._file)

    def __getattr__(self, name):
        return getattr(self._file, name)


def install(root: str, code: int, budget: int, name: str | None = None):
    """Patches ``open`` (builtins, io) and, for EROFS, the os calls that
    change a directory; returns a function that undoes it."""
    state = _Budget(root, code, budget, name)
    real_open = io.open
    saved = {name_: getattr(os, name_) for name_ in _OS_CALLS}

    def undo():
        builtins.open = io.open = real_open
        for name_, call in saved.items():
            setattr(os, name_, call)

    def open_(file, mode="r", *args, **kwargs):
        writing = any(c in mode for c in "wax+")
        if not writing or not state.covers(file):
            return real_open(file, mode, *args, **kwargs)
        if state.spent and code == errno.EROFS:
            raise state.fail(file)
        return _Writer(real_open(file, mode, *args, **kwargs), file, state)

    builtins.open = io.open = open_
    if code != errno.EROFS:
        return undo

    def guarded(call):
        def wrapper(*paths, **kwargs):
            for path in paths[:2]:
                if state.spent and state.covers(path):
                    raise state.fail(path)
            return call(*paths, **kwargs)

        return wrapper

    for name_ in _OS_CALLS:
        setattr(os, name_, guarded(getattr(os, name_)))
    return undo


if __name__ == "__main__":
    split = sys.argv.index("--")
    root, code, budget, *only = sys.argv[1:split]
    install(root, getattr(errno, code), int(budget), only[0] if only else None)
    from ondevice_rl.train.cli import main

    sys.exit(main(sys.argv[split + 1 :]))
