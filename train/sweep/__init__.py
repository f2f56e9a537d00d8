"""Populations of any registered algorithm trained as one program, in rounds.

A request (``request.py``) names a search over a base config; its space
(``space.py``) expands into the members of a plan (``plan.py``): settings
× seeds. The members train as populations (``population.py``), compiled
once per static config (``programs.py``), in rounds (``engine.py``,
``rounds.py``): a sweep (grid or random search) in one round, chunked to fit
memory; a search as one program, a strategy acting between its rounds
(``pbt.py``, ``halving.py``). The directory keeps the finished members
(``store.py``) and a search's round checkpoints (``checkpoints.py``); the
result (``result.py``, ``lineage.py``) is written and printed by
``report.py``, ``figures.py`` and ``terminal.py``.

Example::

    from ondevice_rl.train import get_algorithm
    from ondevice_rl.train.sweep import PBT, LogUniform, run_sweep

    config = get_algorithm("ppo").config(env="CartPole-v1", total_timesteps=100_000)
    result = run_sweep(
        config,
        seeds=4,
        search={"learning_rate": LogUniform(1e-5, 1e-2), "num_envs": [4, 8]},
        env_params={"length": [0.25, 0.5, 1.0]},
        samples=16,
    )
    result.best                # SettingSummary of the best setting
    result.rows()              # one dict per member
    result.programs_compiled   # 2 (one per num_envs value)

    search = run_sweep(
        config, seeds=4, search={"learning_rate": LogUniform(1e-5, 1e-2)},
        samples=16, strategy=PBT(),
    )
    search.lineage.handed_back()   # {seed position: member}, each search's best
"""

from ondevice_rl.train.services.programs import ProgramCache
from ondevice_rl.train.sweep.engine import STRATEGIES, check_plan, run_plan, run_sweep
from ondevice_rl.train.sweep.halving import Halving
from ondevice_rl.train.sweep.lineage import Lineage
from ondevice_rl.train.sweep.pbt import PBT
from ondevice_rl.train.sweep.plan import Member, SweepPlan, build_plan
from ondevice_rl.train.sweep.programs import DEFAULT_CACHE
from ondevice_rl.train.sweep.result import SettingSummary, SweepResult, scores
from ondevice_rl.train.sweep.space import LogUniform, SweepSpecError, Uniform

__all__ = [
    "DEFAULT_CACHE",
    "Halving",
    "Lineage",
    "LogUniform",
    "Member",
    "PBT",
    "ProgramCache",
    "STRATEGIES",
    "SettingSummary",
    "SweepPlan",
    "SweepResult",
    "SweepSpecError",
    "Uniform",
    "build_plan",
    "check_plan",
    "run_plan",
    "run_sweep",
    "scores",
]
