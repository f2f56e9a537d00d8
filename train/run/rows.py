"""A run's logged rows and final window on the host, as segments finish.

Each segment hands back its rows (``name -> [R]``, one per ``log_every``
updates, reduced in the program), the update each row ends at, and the last
``FINAL_WINDOW`` updates' own ``episode_return`` values. ``RowLog`` keeps
them, after the rows a resumed run started with, and gives the run's
metrics and its final return, which reads the full-resolution window, never
the rows.
"""

import numpy as np

from ondevice_rl.metrics import FINAL_WINDOW, final_return
from ondevice_rl.train.run.segments import SegmentResult

_EMPTY = np.zeros(0, np.float32)


class RowLog:
    """Rows since ``earlier`` (``name -> [R0]`` ending at ``earlier_updates``,
    ``earlier_tail`` the final window there)."""

    def __init__(
        self,
        earlier: dict[str, np.ndarray],
        earlier_updates: np.ndarray,
        earlier_tail: list[float],
    ):
        self.earlier = earlier
        self.earlier_updates = np.asarray(earlier_updates, np.int64)
        self.chunks: list[SegmentResult] = []
        self.tail = [float(x) for x in earlier_tail][-FINAL_WINDOW:]

    def add(self, segment: SegmentResult) -> None:
        self.chunks.append(segment)
        self.tail = (self.tail + np.asarray(segment.tail).tolist())[-FINAL_WINDOW:]

    @property
    def latest_return(self) -> float:
        """The last update's ``episode_return`` (NaN before any)."""
        return self.tail[-1] if self.tail else float("nan")

    def metrics(self) -> dict[str, np.ndarray]:
        """``name -> [R]``: every row, the earlier ones first."""
        names = self.chunks[0].rows if self.chunks else self.earlier
        return {
            k: np.concatenate(
                [self.earlier.get(k, _EMPTY)] + [c.rows[k] for c in self.chunks]
            )
            for k in names
        }

    def updates(self) -> np.ndarray:
        """``[R]`` int64: the update each row ends at."""
        return np.concatenate(
            [self.earlier_updates] + [c.updates for c in self.chunks]
        ).astype(np.int64)

    def final_return(self) -> float:
        """``ondevice_rl.metrics.final_return`` of the updates' own values."""
        return final_return(np.asarray(self.tail, np.float64))
