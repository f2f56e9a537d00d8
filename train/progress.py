"""The progress bar of a segmented run: env steps, steps/s, latest return.

Drawn with rich on stderr, so stdout keeps only the run's summary. Disabled,
it prints nothing at all.
"""

import sys

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)


class SegmentProgress:
    """Context manager; ``update`` after each segment, ``log`` for a line."""

    def __init__(self, total_steps: int, label: str, enabled: bool = True):
        self.enabled = enabled
        self._total = total_steps
        self._label = label
        self._progress = None
        self._task = None

    def __enter__(self) -> "SegmentProgress":
        if self.enabled:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(bar_width=20),
                TextColumn("{task.completed:,.0f}/{task.total:,.0f} steps"),
                TextColumn("{task.fields[sps]} sps"),
                TextColumn("return {task.fields[ret]}"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
            )
            self._progress.__enter__()
            self._task = self._progress.add_task(
                self._label, total=self._total, sps="-", ret="-"
            )
        return self

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)
            self._progress = None

    def update(self, env_steps: int, episode_return: float, elapsed_s: float) -> None:
        if self._progress is None:
            return
        sps = f"{env_steps / elapsed_s:,.0f}" if elapsed_s > 0 else "-"
        self._progress.update(
            self._task, completed=env_steps, sps=sps, ret=f"{episode_return:.1f}"
        )

    def log(self, message: str, always: bool = False) -> None:
        """Prints a line above the bar (to stderr); if disabled, only when
        ``always``."""
        if self._progress is not None:
            self._progress.console.print(message)
        elif always:
            print(message, file=sys.stderr, flush=True)
