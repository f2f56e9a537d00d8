"""Run a sweep plan: group by static config, chunk, shard, train, collect.

Members are grouped by static config (``program_config``); each group gets
one compiled program, run over equal chunks of its members (see
``memory.py`` for the memory rule), with the chunk's member axis split over
every device of the mesh. A first Ctrl-C lets the running chunk finish and
stops there; a second one stops at once. Either way the members of finished
chunks are returned (``SweepResult.interrupted``).
"""

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
from jax.sharding import Mesh

from ondevice_rl.devices.distributed import min_bytes_over_processes
from ondevice_rl.devices.sharding import make_mesh, mesh_size, pad_leading, padded_size
from ondevice_rl.train.kit.registry import trainer_for
from ondevice_rl.train.services.interrupt import stop_at_boundary
from ondevice_rl.train.services.memory import (
    check_member_fits,
    max_chunk_for,
    memory_budget,
    plan_chunks,
)
from ondevice_rl.train.services.programs import ProgramCache
from ondevice_rl.train.services.progress import ProgressBar, to_stderr
from ondevice_rl.train.sweep.program import (
    DEFAULT_CACHE,
    population_program,
    program_config,
    reusable_program,
    stack_inputs,
    take,
)
from ondevice_rl.train.sweep.results import GroupInfo, SweepResult
from ondevice_rl.train.sweep.space import Member, SweepPlan, build_plan

#: ``on_chunk(result, group_index, chunk_index)`` after each chunk's results.
ChunkCallback = Callable[[SweepResult, int, int], None]


def group_members(members: Sequence[Member]) -> list[tuple[Any, list[Member]]]:
    """Members by static config, in order of first appearance."""
    groups: dict[Any, list[Member]] = {}
    for m in members:
        groups.setdefault(program_config(m.config), []).append(m)
    return list(groups.items())


def run_plan(
    plan: SweepPlan,
    *,
    chunk_size: int | None = None,
    memory_budget_bytes: int | None = None,
    mesh: Mesh | None = None,
    cache: ProgramCache | None = None,
    progress: bool = False,
    on_chunk: ChunkCallback | None = None,
    finished: Mapping[int, dict] | None = None,
    chunk_sizes: Mapping[Any, int] | None = None,
) -> SweepResult:
    """Trains every member of ``plan``; see ``run_sweep``.

    Members in ``finished`` (index -> metrics, e.g. from an earlier,
    interrupted run of the same plan) are taken as they are and not trained
    again. ``chunk_sizes`` (static config -> members per call) fixes a
    group's chunk size, e.g. to the earlier run's: a member's numbers depend
    on the size of the chunk it is vmapped in (not on the other members), so
    a resumed sweep matches the uninterrupted one exactly.
    """
    mesh = make_mesh() if mesh is None else mesh
    cache = DEFAULT_CACHE if cache is None else cache
    budget = memory_budget_bytes
    if budget is None and chunk_size is None:
        # Every process must pick the same chunk size: agree on the smallest.
        budget = min_bytes_over_processes(memory_budget(mesh))
    result = SweepResult(plan, [None] * len(plan.members))
    for index, metrics in (finished or {}).items():
        result.metrics[index] = metrics
    compiles_before, start = cache.compiles, time.perf_counter()
    groups = group_members([m for m in plan.members if result.metrics[m.index] is None])
    if budget is not None:  # a member that cannot fit is refused before any runs
        for config, _ in groups:
            check_member_fits(config, budget, "one member")
    show = progress and jax.process_index() == 0
    stop = None
    try:
        stop_message = "stopping after the running chunk (Ctrl-C again to stop now)"
        with (
            stop_at_boundary(to_stderr, stop_message) as stop,
            ProgressBar(len(plan.members), "sweep", "members", show) as bar,
        ):
            bar.skip(len(finished or {}))
            for g, (config, members) in enumerate(groups):
                label = f"group {g + 1}/{len(groups)}"
                bar.describe(f"{label}: compiling")
                compiled_before = cache.compiles
                exact = (chunk_sizes or {}).get(config)
                if exact is not None:
                    program = population_program(cache, config, exact, mesh)
                    est = max_chunk_for(config, mesh, budget or 1 << 62)[1]
                else:
                    program, est = _program_for(
                        config, len(members), mesh, cache, chunk_size, budget
                    )
                num_chunks = -(-len(members) // program.chunk_size)
                result.groups.append(
                    GroupInfo(
                        g,
                        config,
                        len(members),
                        program.chunk_size,
                        num_chunks,
                        cache.compiles > compiled_before,
                        est,
                        program.device_bytes,
                    )
                )
                result.programs_compiled = cache.compiles - compiles_before
                defaults = trainer_for(config).default_env_params
                inputs = stack_inputs(members, defaults)
                for c in range(num_chunks):
                    if stop():
                        raise KeyboardInterrupt
                    bar.describe(f"{label}: chunk {c + 1}/{num_chunks}")
                    lo = c * program.chunk_size
                    hi = min(lo + program.chunk_size, len(members))
                    chunk = pad_leading(take(inputs, lo, hi), program.chunk_size)
                    out = program(chunk)
                    for j, m in enumerate(members[lo:hi]):
                        row = lambda x, j=j: x[j]  # noqa: E731
                        result.metrics[m.index] = jax.tree.map(row, out.metrics)
                        result.params[m.index] = jax.tree.map(row, out.params)
                        result.params_finite[m.index] = bool(out.params_finite[j])
                    bar.advance(hi - lo)
                    if on_chunk is not None:
                        on_chunk(result, g, c)
            bar.describe("done")
    except KeyboardInterrupt:
        result.interrupted = True
        result.stop_signal = getattr(stop, "signal", None)
    result.programs_compiled = cache.compiles - compiles_before
    result.seconds = time.perf_counter() - start
    return result


def _program_for(config, num_members, mesh, cache, chunk_size, budget):
    """Picks or compiles the group's program (see ``memory.py``)."""
    num_devices = mesh_size(mesh)
    if chunk_size is not None:
        size = min(
            padded_size(chunk_size, num_devices), padded_size(num_members, num_devices)
        )
        max_chunk, est = max_chunk_for(config, mesh, budget or 1 << 62)
        return population_program(cache, config, size, mesh), est
    max_chunk, est = max_chunk_for(config, mesh, budget)
    program = reusable_program(cache, config, mesh, num_members, max_chunk)
    if program is not None:
        return program, est
    plan = plan_chunks(num_members, max_chunk, num_devices)
    program = population_program(cache, config, plan.chunk_size, mesh)
    per_device = program.chunk_size // num_devices
    if program.device_bytes > budget and per_device > 1:
        # The estimate was too low: size chunks from XLA's own figure instead.
        measured = program.device_bytes / per_device
        max_chunk = max(1, int(budget // measured)) * num_devices
        plan = plan_chunks(num_members, max_chunk, num_devices)
        program = population_program(cache, config, plan.chunk_size, mesh)
    return program, est


def run_sweep(
    config: Any,
    seeds: int | Sequence[int] = 1,
    search: Mapping[str, Any] | None = None,
    env_params: Mapping[str, Any] | None = None,
    *,
    samples: int | None = None,
    sample_seed: int = 0,
    chunk_size: int | None = None,
    memory_budget_bytes: int | None = None,
    mesh: Mesh | None = None,
    cache: ProgramCache | None = None,
    progress: bool = False,
    on_chunk: ChunkCallback | None = None,
) -> SweepResult:
    """Trains a population: every setting of ``search`` × ``env_params``, per seed.

    Args:
        config: base config of any registered algorithm (``PPOConfig``,
            ``A2CConfig``, ...).
        seeds: a count ``n`` (seeds ``0..n-1``) or explicit seeds; a member's
            key is ``jax.random.key(seed)``, as a run trained alone.
        search: config field → list (grid), ``Uniform``/``LogUniform``
            (random, hyperparameters only) or scalar. Static fields (shapes,
            loop lengths) form groups compiled separately.
        env_params: env params field (e.g. ``"length"``) → the same.
        samples, sample_seed: number and seed of random draws.
        chunk_size: members per compiled call; default from the memory rule.
        memory_budget_bytes: bytes per device for a chunk; default
            ``memory_budget(mesh)``.
        mesh: 1-D device mesh for the member axis; default every device of
            every process (``ondevice_rl.devices.sharding.make_mesh``).
        cache: compiled programs to reuse; default the process-wide cache.
        progress: show a rich progress bar (process 0 only).
        on_chunk: called after each chunk with the partial result.

    Returns:
        ``SweepResult`` with per-member metrics ``[num_updates]``, a ranking of
        settings, and how many programs were compiled.

    Raises:
        SweepSpecError: an invalid search (before anything is compiled).
    """
    plan = build_plan(config, seeds, search, env_params, samples, sample_seed)
    return run_plan(
        plan,
        chunk_size=chunk_size,
        memory_budget_bytes=memory_budget_bytes,
        mesh=mesh,
        cache=cache,
        progress=progress,
        on_chunk=on_chunk,
    )
