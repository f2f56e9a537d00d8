"""Files written whole, and failed writes that name their file.

``write_whole(path, write)`` has ``write`` fill a temporary file beside
``path`` and renames it over ``path``: a kill, a full disk or a read-only
mount leaves the old file or the new one, never half of one, and no
temporary file behind. Its failure is ``WriteFailed``: an ``OSError`` that
names ``path`` (not the temporary file) and reads as one line,
``cannot write PATH (reason)``; commands answer it with exit status 1.
``writing(path)`` names ``path`` in an ``OSError`` raised without a file
name (a write to a file already open, zipfile's, matplotlib's);
``write_each(out, writers)`` runs ``{name: write(path)}`` into ``out`` so.
"""

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


class WriteFailed(OSError):
    """A file could not be written; ``str``: ``cannot write PATH (reason)``."""

    def __str__(self) -> str:
        return f"cannot write {self.filename} ({self.strerror})"


@contextlib.contextmanager
def writing(path: str | Path) -> Iterator[None]:
    try:
        yield
    except OSError as e:
        e.filename = e.filename or str(path)
        raise


def write_whole(path: str | Path, write: Callable[[Path], Any]) -> Path:
    """``write(tmp)``, then ``tmp`` renamed to ``path`` (see the module's
    text); ``tmp`` keeps ``path``'s suffix, for writers that go by it."""
    path = Path(path)
    tmp = path.with_name(f".tmp-{path.name}")
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise WriteFailed(e.errno, e.strerror or str(e), str(path)) from e
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return path


def write_each(out: Path, writers: dict[str, Callable[[Path], Any]]) -> list:
    """``write(out / name)`` for each, in order, a failure naming its file;
    what the writers return."""
    written = []
    for name, write in writers.items():
        with writing(out / name):
            written.append(write(out / name))
    return written
