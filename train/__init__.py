"""Learners, the runner, recipes, sweeps, bench and the ``ondevice-rl`` CLI.

``algorithms()`` lists the registered learners; ``get_algorithm(name)``
returns one's record (config class, hyperparameters and their ranges,
``make_trainer``, ``make_train``).
"""


def algorithms() -> tuple[str, ...]:
    from ondevice_rl.train.registry import algorithms

    return algorithms()


def get_algorithm(name: str):
    from ondevice_rl.train.registry import get_algorithm

    return get_algorithm(name)


__all__ = ["algorithms", "get_algorithm"]
