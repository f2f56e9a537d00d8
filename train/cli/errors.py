"""The last word on stderr is ours.

``fail(command, message)`` prints ``ondevice-rl COMMAND: error: MESSAGE``
(one line) and returns the exit status; an error that names the library's
arguments (``checks.Worded``) names the command's flags instead
(``num_segments`` -> ``--segments``, ``seed`` -> ``--seed``). Before
printing it quiets what libraries could still say after it: absl's log
handlers (orbax logs through them), exceptions of background threads
(orbax's, tensorstore's), and "unraisable" exceptions such as asyncio's
"Event loop is closed" printed at interpreter exit.
"""

import sys

from ondevice_rl.files import library_noise
from ondevice_rl.train.run.checks import Worded

#: Exit statuses: a bad input or a damaged file; a write that failed.
BAD_INPUT = 2
WRITE_FAILED = 1
#: Arguments whose flag is not ``--`` + the keyword with dashes.
FLAGS = {"num_segments": "--segments", "out_dir": "--out"}


class _Flags(dict):
    def __missing__(self, keyword: str) -> str:
        return "--" + keyword.replace("_", "-")


def as_flags(error: object) -> object:
    """``error``'s message naming flags, if it names arguments."""
    return error.worded(_Flags(FLAGS)) if isinstance(error, Worded) else error


def fail(command: str, message: object, status: int = BAD_INPUT) -> int:
    """Prints our one-line error for ``command`` last; returns ``status``."""
    if isinstance(message, KeyError) and message.args:
        message = message.args[0]  # str(KeyError) adds quotes
    message = as_flags(message)
    library_noise.silence()
    text = " ".join(str(message).split("\n"))
    sys.stdout.flush()
    print(f"ondevice-rl {command}: error: {text}", file=sys.stderr, flush=True)
    return status
