"""What libraries print from their own threads when a write fails under them.

orbax writes a checkpoint through tensorstore from background threads and
an asyncio loop. When the disk fills or turns read-only mid-write, each of
them reports on its own: absl ``ERROR`` records with tracebacks, thread
exceptions, "Event loop is closed" from callbacks that outlive the loop,
tens to hundreds of lines around the one error that matters, some of them
after it. ``held()`` keeps that noise back while such a write runs:

* the write succeeds: what was held is let out as it would have been
  (records re-emitted, thread and unraisable exceptions sent to the hooks
  that were in place) and the hooks are put back;
* the write raises: the exception in flight says what happened, so what was
  held is dropped, and so is what the library's threads still print while
  they unwind (``silence()``, for the rest of the process).
"""

import contextlib
import logging
import sys
import threading
from collections.abc import Iterator

#: The loggers orbax and its dependencies report through.
LOGGERS = ("absl", "orbax")


class _Held(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def silence() -> None:
    """From now on, library loggers, background threads' exceptions and
    unraisable exceptions (finalizers, asyncio at exit) print nothing."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(logging.CRITICAL + 1)
        logger.propagate = False
    with contextlib.suppress(ImportError):
        from absl import logging as absl_logging

        absl_logging.set_verbosity(absl_logging.FATAL)
        absl_logging.get_absl_handler().setLevel(logging.CRITICAL + 1)
    threading.excepthook = lambda args: None
    sys.unraisablehook = lambda unraisable: None


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Holds library noise while the body runs (see the module's text)."""
    handler = _Held()
    loggers = [logging.getLogger(name) for name in LOGGERS]
    saved = [(lg.propagate, lg.handlers[:]) for lg in loggers]
    for logger in loggers:
        logger.handlers, logger.propagate = [handler], False
    thread_hook, unraisable_hook = threading.excepthook, sys.unraisablehook
    thread_errors: list = []
    unraisable: list = []
    threading.excepthook = thread_errors.append
    sys.unraisablehook = unraisable.append
    try:
        yield
    except BaseException:
        silence()
        raise
    for logger, (propagate, handlers) in zip(loggers, saved, strict=True):
        logger.handlers, logger.propagate = handlers, propagate
    threading.excepthook, sys.unraisablehook = thread_hook, unraisable_hook
    for record in handler.records:
        logging.getLogger(record.name).handle(record)
    for args in thread_errors:
        thread_hook(args)
    for args in unraisable:
        unraisable_hook(args)
