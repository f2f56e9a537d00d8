"""The arguments of a run, checked in one place for the Python API
(``run_training``, ``resume_training``) and ``ondevice-rl train``, with
their limits and defaults.

Errors are ``RunArgError``: one line naming the argument by its keyword
(``seed must be in [0, 2^32), got -1``); ``worded(names)`` says the same
with other names, which is how the CLI speaks of its flags (``--seed ...``)
and ``ondevice_rl.run_training`` of its keywords (``segments``, ``out``).
The run directory's errors (``artifacts.RunDirError``) that name an argument
are ``Worded`` the same way.
"""

import math
import string
from collections.abc import Mapping

from ondevice_rl.ranges import MAX_INT

#: A run's key is ``jax.random.key(seed)`` of a uint32: ``0 <= seed < 2^32``.
SEED_BOUND = 2**32
SEED_RANGE = "[0, 2^32)"
#: The seed of a run that names none.
DEFAULT_SEED = 0
#: Segments a run is cut into unless told otherwise.
DEFAULT_SEGMENTS = 20
#: Episodes per periodic evaluation unless told otherwise.
DEFAULT_EVAL_EPISODES = 10
#: Without ``checkpoint_every``: a checkpoint at the first segment boundary
#: this many seconds of training after the previous one.
CHECKPOINT_SECONDS = 120.0
#: A segment that runs longer than this re-plans the rest in shorter ones.
SEGMENT_SECONDS = 10.0
#: Without ``log_every``: rows of the smallest of 1, 2, 5, 10, 20, 50, ...
#: updates that keeps a run within this many rows.
DEFAULT_LOG_ROWS = 1000
#: How ``train_from_config`` and ``resume_training`` name their arguments
#: where the keyword alone would not say it.
PYTHON_NAMES = {"force": "force=True", "resume": "resume_training"}


def literal(text: object) -> str:
    """``text`` for a template: its braces are not fields."""
    return str(text).replace("{", "{{").replace("}", "}}")


class Worded(Exception):
    """An error whose ``template`` names arguments as ``{keyword}`` fields;
    ``str(error)`` fills in ``PYTHON_NAMES`` or the keywords themselves,
    ``worded(names)`` other names (the CLI's flags)."""

    def __init__(self, template: str):
        self.template = template
        super().__init__(self.worded())

    def worded(self, names: Mapping[str, str] | None = None) -> str:
        """The message with ``names[keyword]`` for each argument it names
        (a mapping's ``__missing__`` counts)."""
        names = names if names is not None else {}
        fields = {f for _, f, _, _ in string.Formatter().parse(self.template) if f}
        words = {}
        for field in fields:
            try:
                words[field] = names[field]
            except KeyError:
                words[field] = PYTHON_NAMES.get(field, field)
        return self.template.format(**words)

    def reword(self, names: Mapping[str, str]) -> "Worded":
        """This error, now saying ``worded(names)``."""
        self.args = (self.worded(names),)
        return self


class RunArgError(Worded, ValueError):
    """A bad run argument (one line)."""


def default_log_every(num_updates: int, eval_every: int | None = None) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50, ... giving at most
    ``DEFAULT_LOG_ROWS`` rows for ``num_updates`` updates. With evaluations
    every ``eval_every`` updates, unless one of the two divides the other,
    the smallest divisor of ``eval_every`` (or multiple, if it is shorter)
    giving at most as many rows: a segment runs a multiple of both
    intervals, and 100 beside 781 would make it 78,100 updates, with no
    progress and no checkpoint in between."""
    wanted = max(1.0, num_updates / DEFAULT_LOG_ROWS)
    decade = 10 ** math.floor(math.log10(wanted))
    every = next(m * decade for m in (1, 2, 5, 10) if m * decade >= wanted)
    if eval_every is None or eval_every % every == 0 or every % eval_every == 0:
        return every
    if eval_every < wanted:
        return eval_every * math.ceil(wanted / eval_every)
    return min(
        d for d in range(math.ceil(wanted), eval_every + 1) if eval_every % d == 0
    )


def check_seed(seed: int) -> int:
    """``seed`` if it is a valid PRNG seed, else ``RunArgError``."""
    if not 0 <= seed < SEED_BOUND:
        raise RunArgError(f"{{seed}} must be in {SEED_RANGE}, got {seed}")
    return int(seed)


def check_run_args(
    *,
    seed: int = 0,
    num_segments: int | None = None,
    checkpoint_every: int | None = None,
    eval_every: int | None = None,
    eval_episodes: int | None = None,
    log_every: int | None = None,
) -> None:
    """Checks ``train_from_config``'s plain arguments (None: not given); raises
    ``RunArgError``. Hyperparameters, env params and the config are checked
    where they are read (``RunSpec.create``, the config's constructor)."""
    check_seed(seed)
    for name, value in (
        ("num_segments", num_segments),
        ("checkpoint_every", checkpoint_every),
    ):
        if value is not None and value < 1:
            raise RunArgError(f"{{{name}}} must be positive, got {value}")
    for name, value in (
        ("eval_every", eval_every),
        ("eval_episodes", eval_episodes),
        ("log_every", log_every),
    ):
        if value is not None and not 1 <= value < MAX_INT:
            raise RunArgError(f"{{{name}}} must be in [1, 2^31), got {value}")
    if eval_episodes is not None and eval_every is None:
        raise RunArgError("{eval_episodes} needs {eval_every}")
