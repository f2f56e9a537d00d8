"""The one progress bar: training runs (env steps, steps/s, latest return)
and sweeps (members done).

Drawn with rich on stderr, so stdout keeps only the summaries. Without a
terminal (stdout or stderr piped to a file: a cluster job's log), it prints
plain lines instead, which a log file keeps: a training run one per
``update`` (env steps, steps/s, latest return, ETA), a sweep or search one
per ``advance`` (members or rounds done, time so far, ETA). Disabled, it
prints nothing at all (``log(..., always=True)`` still prints its line).
"""

import sys
import time

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


def to_stderr(message: str) -> None:
    """The default sink of a host-side notice (a stop at a boundary, a file
    that could not be read): one line on stderr, at once."""
    print(message, file=sys.stderr, flush=True)


def _clock(seconds: float) -> str:
    """``h:mm:ss``."""
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{secs:02d}"


class ProgressBar:
    """Context manager over ``total`` units of work.

    ``unit="steps"`` shows steps/s and the latest episode return
    (``update(steps, episode_return, elapsed_s)``); any other unit shows a
    count (``advance(n)``; ``skip(n)`` for work a resume found done, which
    does not count toward the rate; ``describe(text)``).
    """

    def __init__(
        self,
        total: int,
        label: str,
        unit: str = "steps",
        enabled: bool = True,
        lines: bool | None = None,
    ):
        self.enabled = enabled
        self._total, self._label, self._unit = total, label, unit
        self._progress = None
        self._task = None
        if lines is None:
            lines = not (sys.stdout.isatty() and sys.stderr.isatty())
        #: Plain progress lines instead of a bar.
        self.lines = enabled and lines
        self._from = 0  # env steps (or units) where this call's work started
        self._done = 0  # units done (counted units)
        self._start = time.perf_counter()

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
        self._start = time.perf_counter()
        if self.enabled and not self.lines:
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
        """A training run reached ``env_steps`` after ``elapsed_s`` seconds of
        this call's training (0: it starts there)."""
        if self.lines:
            if elapsed_s > 0:
                self._line(env_steps, episode_return, elapsed_s)
            else:
                self._from = env_steps
            return
        if self._progress is None:
            return
        sps = f"{env_steps / elapsed_s:,.0f}" if elapsed_s > 0 else "-"
        self._progress.update(
            self._task, completed=env_steps, sps=sps, ret=f"{episode_return:.1f}"
        )

    def _line(self, env_steps: int, episode_return: float, elapsed_s: float) -> None:
        """``CartPole-v1 ppo: 40,960/500,000 steps (8%), 31,204 steps/s,
        return 23.4, ETA 0:00:14``."""
        rate = (env_steps - self._from) / elapsed_s
        left = max(self._total - env_steps, 0)
        eta = _clock(left / rate) if rate > 0 else "-"
        print(
            f"{self._label}: {env_steps:,}/{self._total:,} steps "
            f"({100 * env_steps / max(self._total, 1):.0f}%), {rate:,.0f} steps/s, "
            f"return {episode_return:.1f}, ETA {eta}",
            file=sys.stderr,
            flush=True,
        )

    def advance(self, count: int) -> None:
        self._done += count
        if self.lines and count:
            elapsed = time.perf_counter() - self._start
            rate = (self._done - self._from) / elapsed if elapsed > 0 else 0.0
            left = max(self._total - self._done, 0)
            eta = _clock(left / rate) if rate > 0 else "-"
            print(
                f"{self._label}: {self._done}/{self._total} {self._unit}, "
                f"{_clock(elapsed)} so far, ETA {eta}",
                file=sys.stderr,
                flush=True,
            )
        if self._progress is not None:
            self._progress.advance(self._task, count)

    def skip(self, count: int) -> None:
        """``count`` units found done (a resume): shown, not timed."""
        self._done += count
        self._from += count
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
        elif always or self.lines:
            print(message, file=sys.stderr, flush=True)
