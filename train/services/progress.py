"""The one progress bar: training runs (env steps, steps/s, latest return)
and sweeps (members done).

Drawn with rich on stderr, so stdout keeps only the summaries. Disabled, it
prints nothing at all (``log(..., always=True)`` still prints its line).
"""

import sys

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class ProgressBar:
    """Context manager over ``total`` units of work.

    ``unit="steps"`` shows steps/s and the latest episode return
    (``update(steps, episode_return, elapsed_s)``); any other unit shows a
    count (``advance(n)``, ``describe(text)``).
    """

    def __init__(
        self, total: int, label: str, unit: str = "steps", enabled: bool = True
    ):
        self.enabled = enabled
        self._total, self._label, self._unit = total, label, unit
        self._progress = None
        self._task = None

    def _columns(self) -> list:
        if self._unit == "steps":
            return [
                TextColumn("[bold]{task.description}"),
                BarColumn(bar_width=20),
                TextColumn("{task.completed:,.0f}/{task.total:,.0f} steps"),
                TextColumn("{task.fields[sps]} sps"),
                TextColumn("return {task.fields[ret]}"),
                TimeRemainingColumn(),
            ]
        return [
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(self._unit),
            TimeElapsedColumn(),
        ]

    def __enter__(self) -> "ProgressBar":
        if self.enabled:
            self._progress = Progress(*self._columns(), console=Console(stderr=True))
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
        """A training run reached ``env_steps``."""
        if self._progress is None:
            return
        sps = f"{env_steps / elapsed_s:,.0f}" if elapsed_s > 0 else "-"
        self._progress.update(
            self._task, completed=env_steps, sps=sps, ret=f"{episode_return:.1f}"
        )

    def advance(self, count: int) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, count)

    def describe(self, text: str) -> None:
        if self._progress is not None:
            self._progress.update(self._task, description=text)

    def log(self, message: str, always: bool = False) -> None:
        """Prints a line above the bar (to stderr, as it is: no wrapping, no
        markup); if disabled, only when ``always``."""
        if self._progress is not None:
            self._progress.console.print(message, soft_wrap=True, markup=False)
        elif always:
            print(message, file=sys.stderr, flush=True)
