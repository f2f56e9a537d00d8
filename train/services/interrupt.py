"""Ctrl-C and SIGTERM between compiled pieces of work.

A running XLA program cannot be interrupted, so a first SIGINT (Ctrl-C) or
SIGTERM (a scheduler's preemption) only asks the host loop to stop at the
next boundary (segment, chunk) with everything so far kept. A second one
ends the process at once (exit 130 or 143): whatever is on disk stays, and
checkpoints are written atomically. ``wait_ready`` waits for device results
in short sleeps, so that a second signal is acted on within a fraction of a
second even while a program runs.
"""

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import jax

#: Exit status for a stop caused by each signal (128 + signal number).
EXIT_STATUS = {signal.SIGINT: 130, signal.SIGTERM: 143}


class StopRequest:
    """What ``stop_at_boundary`` yields: truthy once a stop was asked for."""

    def __init__(self):
        self.signal: int | None = None

    def __bool__(self) -> bool:
        return self.signal is not None

    def __call__(self) -> bool:
        return self.signal is not None

    @property
    def exit_status(self) -> int:
        return EXIT_STATUS.get(self.signal, 130)

    @property
    def name(self) -> str:
        return "Ctrl-C" if self.signal == signal.SIGINT else "SIGTERM"


@contextlib.contextmanager
def stop_at_boundary(
    notify: Callable[[str], None], message: str
) -> Iterator[StopRequest]:
    """Yields a ``StopRequest``; SIGINT/SIGTERM set it, a second one exits.

    Handlers are installed only in the main thread and only over the default
    ones (if someone else owns a signal, it is left alone); the previous
    handlers are restored on exit.
    """
    request = StopRequest()
    main = threading.current_thread() is threading.main_thread()
    defaults = {
        signal.SIGINT: signal.default_int_handler,
        signal.SIGTERM: signal.SIG_DFL,
    }

    def handler(signum, frame):
        if request:
            print(f"{signal.Signals(signum).name} again: stopping now", file=sys.stderr)
            sys.stderr.flush()
            os._exit(EXIT_STATUS.get(signum, 130))
        request.signal = signum
        notify(f"{request.name}: {message}")

    previous = {}
    if main:
        for sig, default in defaults.items():
            if signal.getsignal(sig) is default:
                previous[sig] = signal.signal(sig, handler)
    try:
        yield request
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def wait_ready(tree: Any, poll_s: float = 0.05) -> Any:
    """Waits for every array of ``tree`` in short sleeps (signal handlers run
    in between); returns ``tree``."""
    for leaf in jax.tree.leaves(tree):
        if isinstance(leaf, jax.Array):
            while not leaf.is_ready():
                time.sleep(poll_s)
    return tree
