"""The arguments of a run, checked in one place for the Python API
(``run_training``, ``resume_training``) and ``ondevice-rl train``, with
their limits and defaults.

Errors are ``RunArgError``: one line naming the argument by its keyword
(``seed must be in [0, 2^32), got -1``); ``worded(names)`` says the same
with other names, which is how the CLI speaks of its flags (``--seed ...``).
"""

from collections.abc import Mapping

from ondevice_rl.ranges import MAX_INT

#: A run's key is ``jax.random.key(seed)`` of a uint32: ``0 <= seed < 2^32``.
SEED_BOUND = 2**32
SEED_RANGE = "[0, 2^32)"
#: Segments a run is cut into unless told otherwise.
DEFAULT_SEGMENTS = 20
#: Episodes per periodic evaluation unless told otherwise.
DEFAULT_EVAL_EPISODES = 10
#: Without ``checkpoint_every``: a checkpoint at the first segment boundary
#: this many seconds of training after the previous one.
CHECKPOINT_SECONDS = 120.0
#: The keyword arguments checked here.
RUN_ARGS = ("seed", "num_segments", "checkpoint_every", "eval_every", "eval_episodes")


class RunArgError(ValueError):
    """A bad run argument. ``template`` names arguments as ``{keyword}``
    fields; ``str(error)`` fills in the keywords themselves."""

    def __init__(self, template: str):
        self.template = template
        super().__init__(self.worded())

    def worded(self, names: Mapping[str, str] | None = None) -> str:
        """The message with ``names[keyword]`` for each argument it names."""
        names = names or {}
        return self.template.format(**{k: names.get(k, k) for k in RUN_ARGS})


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
) -> None:
    """Checks ``run_training``'s plain arguments (None: not given); raises
    ``RunArgError``. Hyperparameters, env params and the config are checked
    where they are read (``RunSpec.create``, the config's constructor)."""
    check_seed(seed)
    for name, value in (
        ("num_segments", num_segments),
        ("checkpoint_every", checkpoint_every),
    ):
        if value is not None and value < 1:
            raise RunArgError(f"{{{name}}} must be positive, got {value}")
    for name, value in (("eval_every", eval_every), ("eval_episodes", eval_episodes)):
        if value is not None and not 1 <= value < MAX_INT:
            raise RunArgError(f"{{{name}}} must be in [1, 2^31), got {value}")
    if eval_episodes is not None and eval_every is None:
        raise RunArgError("{eval_episodes} needs {eval_every}")
