"""The last word on stderr is ours.

``fail(command, message)`` prints ``ondevice-rl COMMAND: error: MESSAGE``
(one line) and returns the exit status. Before printing it quiets what
libraries could still say after it: absl's log handlers (orbax logs through
them), exceptions of background threads (orbax's, tensorstore's), and
"unraisable" exceptions such as asyncio's "Event loop is closed" printed at
interpreter exit.
"""

import logging
import sys
import threading

#: Exit statuses: a bad input or a damaged file; a write that failed.
BAD_INPUT = 2
WRITE_FAILED = 1


def quiet_libraries() -> None:
    """From now on, library threads, loggers and finalizers print nothing."""
    for name in ("absl", "orbax"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.CRITICAL + 1)
        logger.propagate = False
    try:
        from absl import logging as absl_logging

        absl_logging.set_verbosity(absl_logging.FATAL)
        absl_logging.get_absl_handler().setLevel(logging.CRITICAL + 1)
    except ImportError:
        pass
    threading.excepthook = lambda args: None
    sys.unraisablehook = lambda unraisable: None


def fail(command: str, message: object, status: int = BAD_INPUT) -> int:
    """Prints our one-line error for ``command`` last; returns ``status``."""
    if isinstance(message, KeyError) and message.args:
        message = message.args[0]  # str(KeyError) adds quotes
    quiet_libraries()
    text = " ".join(str(message).split("\n"))
    sys.stdout.flush()
    print(f"ondevice-rl {command}: error: {text}", file=sys.stderr, flush=True)
    return status
