"""Ctrl-C between compiled pieces of work.

A running XLA program cannot be interrupted, so a first Ctrl-C only asks the
host loop to stop at the next boundary (segment, chunk) with everything so far
kept; a second one raises ``KeyboardInterrupt`` at once.
"""

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def stop_at_boundary(
    notify: Callable[[str], None], message: str
) -> Iterator[Callable[[], bool]]:
    """Yields ``requested() -> bool``, True once Ctrl-C was pressed.

    The handler is installed only in the main thread and only over Python's
    default one (if someone else owns SIGINT, it is left alone); the previous
    handler is restored on exit.
    """
    pressed = []
    installable = (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    )

    def handler(signum, frame):
        if pressed:
            raise KeyboardInterrupt
        pressed.append(True)
        notify(message)

    previous = signal.signal(signal.SIGINT, handler) if installable else None
    try:
        yield lambda: bool(pressed)
    finally:
        if installable:
            signal.signal(signal.SIGINT, previous)
