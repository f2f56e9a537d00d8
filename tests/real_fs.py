"""Real file system faults at a set point of a run.

``python tests/real_fs.py FUNCTION CALLS ACTION TARGET [LEFT] -- ARGS...``
runs ``ondevice-rl ARGS`` and, when ``FUNCTION`` (``module:attr``, e.g.
``ondevice_rl.files.checkpoint:Checkpoints.save``) has returned ``CALLS`` times,
does ``ACTION`` to ``TARGET``:

* ``fill``: writes a file into ``TARGET`` (a tmpfs) until ``LEFT`` bytes
  are free: the disk really is full for the writes after it;
* ``readonly``: remounts the tmpfs at ``TARGET`` read-only;
* ``remove``: deletes the directory ``TARGET``; ``move``: renames it to
  ``TARGET.moved``.

Nothing is patched but that one function's return; the faults are the
kernel's. ``tmpfs(path, size)`` mounts one (root only: ``MountRefused``
otherwise) and unmounts it when the ``with`` block ends.
"""

import contextlib
import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path


class MountRefused(RuntimeError):
    pass


@contextlib.contextmanager
def tmpfs(path: Path, size: str = "4m"):
    path.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
            capture_output=True,
            text=True,
        )
    except OSError as e:  # no mount(8) here
        raise MountRefused(f"mount: {e.strerror}") from None
    if done.returncode:
        raise MountRefused(done.stderr.strip() or f"mount exited {done.returncode}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(target: Path, left: int) -> None:
    """Writes ``target/filler`` until ``left`` bytes of its file system are
    free (or it is full)."""
    stat = os.statvfs(target)
    size = max(stat.f_bavail * stat.f_frsize - left, 0)
    with contextlib.suppress(OSError), open(target / "filler", "wb") as f:
        f.write(b"\0" * size)


def act(action: str, target: Path, left: int) -> None:
    if action == "fill":
        fill(target, left)
    elif action == "readonly":
        subprocess.run(["mount", "-o", "remount,ro", str(target)], check=True)
    elif action == "remove":
        shutil.rmtree(target)
    elif action == "move":
        target.rename(target.with_name(target.name + ".moved"))
    else:
        raise ValueError(action)


def _hook(function: str, calls: int, action: str, target: Path, left: int) -> None:
    module_name, attr = function.split(":")
    owner = importlib.import_module(module_name)
    *path, name = attr.split(".")
    for part in path:
        owner = getattr(owner, part)
    original, seen = getattr(owner, name), [0]

    def wrapper(*args, **kwargs):
        value = original(*args, **kwargs)
        seen[0] += 1
        if seen[0] == calls:
            act(action, target, left)
        return value

    setattr(owner, name, wrapper)


if __name__ == "__main__":
    split = sys.argv.index("--")
    function, calls, action, target, *rest = sys.argv[1:split]
    _hook(function, int(calls), action, Path(target), int(rest[0]) if rest else 0)
    from ondevice_rl.train.cli import main

    sys.exit(main(sys.argv[split + 1 :]))
