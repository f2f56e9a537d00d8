"""The algorithms, by name: the one place that imports them.

Adding a learner is a subpackage ``train/<name>/`` exporting an
``ALGORITHM`` record (see ``train/kit/protocol.py``) and one line below.
"""

import difflib
import functools
from typing import Any

from ondevice_rl.train import a2c, dqn, ppo, pqn, sac, td3
from ondevice_rl.train.kit.protocol import Algorithm

_ALGORITHMS: dict[str, Algorithm] = {
    "ppo": ppo.ALGORITHM,
    "a2c": a2c.ALGORITHM,
    "pqn": pqn.ALGORITHM,
    "dqn": dqn.ALGORITHM,
    "sac": sac.ALGORITHM,
    "td3": td3.ALGORITHM,
}
DEFAULT = "ppo"


def algorithms() -> tuple[str, ...]:
    """The registered algorithm names."""
    return tuple(_ALGORITHMS)


def get_algorithm(name: str) -> Algorithm:
    """The record of ``name``; KeyError (one line, close matches) if unknown."""
    try:
        return _ALGORITHMS[name]
    except KeyError:
        close = difflib.get_close_matches(str(name), _ALGORITHMS, n=2, cutoff=0.5)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise KeyError(
            f"unknown algorithm {name!r}.{hint} Known: {', '.join(_ALGORITHMS)}"
        ) from None


def algorithm_of(config: Any) -> Algorithm:
    """The algorithm whose config class ``config`` is an instance of."""
    for algorithm in _ALGORITHMS.values():
        if type(config) is algorithm.config:
            return algorithm
    raise TypeError(f"{type(config).__name__} is not a registered algorithm config")


@functools.lru_cache(maxsize=8)
def trainer_for(config: Any) -> Any:
    """``make_trainer(config)`` of ``config``'s algorithm, built once per
    config (the runner, the memory rule and evaluation share it)."""
    return algorithm_of(config).make_trainer(config)
