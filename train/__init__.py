"""Learners, the runner, recipes, sweeps, bench and the ``ondevice-rl`` CLI.

The package face (everything here is imported on first use):

* ``algorithms()`` lists the registered learners; ``get_algorithm(name)``
  returns one's record (config class, hyperparameters and their ranges,
  ``make_trainer``, ``make_train``);
* ``load_recipe(name_or_path)`` the config a shipped recipe (or a TOML file)
  describes;
* ``train_from_config(config, ...)`` trains a config in compiled segments,
  with a run directory when ``out_dir`` is given; ``resume_training(out_dir)``
  continues one from its latest checkpoint. (``ondevice_rl.run_training``
  is the same from keywords, as the ``ondevice-rl train`` command.)

Rooms: ``kit`` (the learner protocol, registry and shared learner pieces),
one package per learner (``ppo``, ``a2c``, ``dqn``, ``pqn``, ``sac``,
``td3``), ``run`` (one run in segments and its directory), ``services``
(host-side pieces shared by runs and sweeps), ``use`` (a trained policy:
load, eval, render, plots), ``recipes``, ``sweep``, ``bench`` (speed, and
GPU launches counted without a GPU) and ``cli``.
"""

import importlib

_FACE = {
    "algorithms": "ondevice_rl.train.kit.registry",
    "get_algorithm": "ondevice_rl.train.kit.registry",
    "load_recipe": "ondevice_rl.train.recipes.loader",
    "train_from_config": "ondevice_rl.train.run.runner",
    "resume_training": "ondevice_rl.train.run.runner",
}

__all__ = sorted(_FACE)


def __getattr__(name: str):
    if name in _FACE:
        return getattr(importlib.import_module(_FACE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_FACE))
