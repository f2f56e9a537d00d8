"""Populations: sweeps of any registered algorithm trained as
``jit(vmap(train))``, compiled once per static config, chunked to fit memory
and sharded over every device.

Example::

    from ondevice_rl.train import get_algorithm
    from ondevice_rl.train.sweep import LogUniform, run_sweep

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

Searches that act on the population between rounds (population-based
training, successive halving) are ``run_search`` (``search.py``)::

    from ondevice_rl.train.sweep import PBT, run_search

    result = run_search(
        config, PBT(), seeds=4, search={"learning_rate": LogUniform(1e-5, 1e-2)},
        samples=16,
    )
    result.handed_back()       # {seed position: member}, each search's best
"""

from ondevice_rl.train.services.memory import (
    ChunkPlan,
    estimate_member_bytes,
    memory_budget,
    plan_chunks,
)
from ondevice_rl.train.services.programs import ProgramCache
from ondevice_rl.train.sweep.program import (
    DEFAULT_CACHE,
    PopulationInputs,
    Program,
    compile_program,
    population_program,
    program_config,
    reusable_program,
    stack_inputs,
)
from ondevice_rl.train.sweep.results import (
    GroupInfo,
    SettingSummary,
    SweepResult,
    format_values,
    scores,
)
from ondevice_rl.train.sweep.run import group_members, run_plan, run_sweep
from ondevice_rl.train.sweep.search import run_search, search_plan
from ondevice_rl.train.sweep.search_result import SearchResult
from ondevice_rl.train.sweep.space import (
    LogUniform,
    Member,
    SweepPlan,
    SweepSpecError,
    Uniform,
    build_plan,
    env_param_fields,
)
from ondevice_rl.train.sweep.strategies import PBT, Halving, Independent

__all__ = [
    "DEFAULT_CACHE",
    "ChunkPlan",
    "GroupInfo",
    "Halving",
    "Independent",
    "LogUniform",
    "PBT",
    "Member",
    "PopulationInputs",
    "Program",
    "ProgramCache",
    "SearchResult",
    "SettingSummary",
    "SweepPlan",
    "SweepResult",
    "SweepSpecError",
    "Uniform",
    "build_plan",
    "compile_program",
    "env_param_fields",
    "estimate_member_bytes",
    "format_values",
    "group_members",
    "memory_budget",
    "plan_chunks",
    "population_program",
    "program_config",
    "reusable_program",
    "run_plan",
    "run_search",
    "run_sweep",
    "scores",
    "search_plan",
    "stack_inputs",
]
