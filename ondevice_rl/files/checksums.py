"""A directory's files, recorded when complete and verified before use.

``record(directory)`` writes ``checksums.json`` into ``directory``: the size
and SHA-256 of every byte of every other file below it. ``verify(directory)``
reads them all again and says, in a few words, the first thing that differs
(None if nothing does). A checkpoint cut short, emptied or with one byte
changed fails; so does one without a record (a kill or a full disk between
its last file and the record, or one written before records were kept).
"""

import hashlib
import json
import os
from pathlib import Path

CHECKSUM_FILE = "checksums.json"
_ALGORITHM = "sha256"
_BLOCK = 1 << 20


def _digest(path: Path, algorithm: str = _ALGORITHM) -> str:
    h = hashlib.new(algorithm)
    with path.open("rb") as f:
        while block := f.read(_BLOCK):
            h.update(block)
    return h.hexdigest()


def _files(directory: Path) -> list[str]:
    """Every file below ``directory`` but the record, as sorted POSIX paths
    relative to it."""
    names = []
    for root, _, files in os.walk(directory):
        for name in files:
            rel = (Path(root) / name).relative_to(directory).as_posix()
            if rel != CHECKSUM_FILE:
                names.append(rel)
    return sorted(names)


def record(directory: str | Path) -> Path:
    """Writes ``directory/checksums.json`` (atomically, synced) for the files
    there now; returns its path."""
    directory = Path(directory)
    files = {
        rel: [(directory / rel).stat().st_size, _digest(directory / rel)]
        for rel in _files(directory)
    }
    path = directory / CHECKSUM_FILE
    tmp = directory / f".{CHECKSUM_FILE}.tmp"
    with tmp.open("w") as f:
        json.dump({"algorithm": _ALGORITHM, "files": files}, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def verify(directory: str | Path) -> str | None:
    """None if every file recorded in ``directory/checksums.json`` is there
    with its size and checksum; else why not, in a few words."""
    directory = Path(directory)
    path = directory / CHECKSUM_FILE
    if not path.is_file():
        return f"no {CHECKSUM_FILE}: unfinished, or from an older version"
    try:
        stored = json.loads(path.read_text())
        algorithm, files = stored["algorithm"], dict(stored["files"])
        hashlib.new(algorithm)
    except (OSError, ValueError, KeyError, TypeError):
        return f"{CHECKSUM_FILE} unreadable"
    for rel, entry in sorted(files.items()):
        try:
            size, digest = entry
            file = directory / rel
            actual = file.stat().st_size
        except (TypeError, ValueError):
            return f"{CHECKSUM_FILE} unreadable"
        except OSError:
            return f"{rel} missing"
        if actual != size:
            return f"{rel} is {actual} bytes, {size} recorded"
        try:
            actual_digest = _digest(file, algorithm)
        except OSError as e:
            return f"{rel} unreadable ({e.strerror})"
        if actual_digest != digest:
            return f"{rel} differs from its checksum"
    return None
