"""TensorBoard event files beside ``metrics.jsonl``.

``TensorBoardLog(run_dir)`` writes, as segments finish, every metric of every
row as a scalar against env steps, with ``tensorboardX``'s event records,
tags grouped as ``metric_tag`` says (``charts/episode_return``,
``losses/td_loss``, ``eval/eval_return``), and each segment's ``charts/sps``;
non-finite values (rows without a finished episode, ``eval_return`` between
evaluations) are skipped. ``tensorboard --logdir runs/`` then shows every
run. A resumed run opens a new event file starting with a purge at the
checkpoint, so the rows the interrupted run wrote after it are hidden, as
they are dropped from ``metrics.jsonl``. Records (one event per row) are
framed here with tensorboardX's CRC, written in the calling thread and
flushed to the OS per segment, synced to disk only at the end (a kill loses
nothing; syncing every segment cost a default run more than its rows): a
failed write (a full disk) is an ``OSError`` there, not a dead background
thread. ``read_scalars(run_dir)`` reads them back (tests, tools).
"""

import itertools
import math
import os
import socket
import struct
import time
from pathlib import Path

import numpy as np

EVENT_GLOB = "events.out.tfevents.*"
_FILE_NUMBER = itertools.count()
#: Metrics shown under ``charts/``; ``eval_*`` go under ``eval/``, the rest
#: (losses, entropies, Q-values, temperatures) under ``losses/``.
CHARTS = ("episode_return", "episode_length", "episodes", "epsilon", "sps")


def metric_tag(name: str) -> str:
    """The grouped tag of a metric (TensorBoard, W&B)."""
    if name.startswith("eval"):
        return f"eval/{name}"
    return f"{'charts' if name in CHARTS else 'losses'}/{name}"


class TensorBoardLog:
    """Scalars of a run into ``run_dir`` (a no-op if tensorboardX is missing:
    ``enabled`` is False then)."""

    def __init__(self, run_dir: Path, steps_per_update: int, first_update: int = 0):
        self.steps_per_update = steps_per_update
        try:  # lazy: without tensorboardX the log is a no-op
            from tensorboardX.proto.event_pb2 import Event, SessionLog
            from tensorboardX.proto.summary_pb2 import Summary
            from tensorboardX.record_writer import masked_crc32c
        except ImportError:
            self.path = None
            return
        self._event, self._summary, self._crc = Event, Summary, masked_crc32c
        # Two files opened within a second by one process get distinct names.
        name = (
            f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}"
            f".{os.getpid()}.{next(_FILE_NUMBER)}"
        )
        # Opened per write, not held: a process holding no file open for
        # writing lets its file system be remounted read-only under it.
        self.path, self._pending = Path(run_dir) / name, []
        self.path.write_bytes(b"")
        self._write(Event(wall_time=time.time(), file_version="brain.Event:2"))
        if first_update:
            purge = first_update * steps_per_update + 1
            start = SessionLog(status=SessionLog.START)
            self._write(Event(step=purge, file_version="brain.Event:2"))
            self._write(Event(step=purge, session_log=start))
        self._flush()

    @property
    def enabled(self) -> bool:
        return self.path is not None

    def _write(self, event) -> None:
        """One TFRecord: length, its CRC, the event, its CRC."""
        data = event.SerializeToString()
        header = struct.pack("<Q", len(data))
        crc = self._crc
        self._pending.append(
            header
            + struct.pack("<I", crc(header))
            + data
            + struct.pack("<I", crc(data))
        )

    def append(
        self,
        metrics: dict[str, np.ndarray],
        updates: np.ndarray,
        sps: float | None = None,
    ) -> None:
        """Writes the ``[R]`` rows ending at ``updates`` (and the segment's
        steps per second at the last), one event per row, and flushes them
        to disk."""
        if self.path is None:
            return
        now = time.time()
        steps = (np.asarray(updates, np.int64) * self.steps_per_update).tolist()
        tags = [metric_tag(name) for name in metrics]
        columns = [np.asarray(v, np.float64).tolist() for v in metrics.values()]
        value = self._summary.Value
        for i, step in enumerate(steps):
            values = [
                value(tag=tag, simple_value=column[i])
                for tag, column in zip(tags, columns, strict=True)
                if math.isfinite(column[i])
            ]
            if sps is not None and i == len(steps) - 1:
                values.append(value(tag=metric_tag("sps"), simple_value=sps))
            summary = self._summary(value=values)
            self._write(self._event(wall_time=now, step=step, summary=summary))
        self._flush()

    def _flush(self) -> None:
        """Appends the records written since the last flush to the file."""
        pending, self._pending = b"".join(self._pending), []
        with self.path.open("ab") as f:
            f.write(pending)

    def close(self) -> None:
        """Syncs the file to disk and closes it."""
        if self.path is not None:
            self._flush()
            with self.path.open("ab") as f:
                os.fsync(f.fileno())
            self.path = None


def _records(path: Path):
    """The payloads of a TFRecord file (length, crc, data, crc; CRCs not
    checked; a torn last record is ignored)."""
    data = path.read_bytes()
    offset = 0
    while offset + 12 <= len(data):
        (length,) = struct.unpack_from("<Q", data, offset)
        end = offset + 12 + length
        if end + 4 > len(data):
            return
        yield data[offset + 12 : end]
        offset = end + 4


def read_scalars(run_dir: str | Path) -> dict[str, list[tuple[int, float]]]:
    """``tag -> [(step, value), ...]`` from every event file in ``run_dir``
    (needs tensorboardX's protobuf classes)."""
    from tensorboardX.proto.event_pb2 import Event  # lazy: as TensorBoardLog's

    scalars: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(Path(run_dir).glob(EVENT_GLOB)):
        for record in _records(path):
            event = Event.FromString(record)
            for value in event.summary.value:
                scalars.setdefault(value.tag, []).append(
                    (int(event.step), float(value.simple_value))
                )
    return scalars
