"""Train a plan: populations in rounds, a strategy acting between them.

A population (``population.py``) trains in rounds of the learner's updates.
What varies is how many populations a plan makes and what happens between
their rounds:

* **A sweep** (grid or random search; no strategy, no checkpoints): every
  member trains in one round. Members are grouped by static config (one
  program each) and each group is cut into equal chunks under the memory
  rule, each chunk a population of its own; a member's key is
  ``jax.random.key(seed)``, as a run trained alone.
* **A search** (a ``strategy`` or ``round_updates`` or ``checkpoints``):
  the whole plan is one population, one program, trained in rounds of
  ``round_updates`` updates (default about 20 rounds). After each round the
  strategy's jitted step acts on it on the device (``pbt.py``,
  ``halving.py``); only the scores and the lineage (who copied whom,
  hyperparameters) come to the host. Each seed's members are a group,
  searched on their own; member ``i`` of a group starts from
  ``fold_in(key(seed), i)``. With ``checkpoints`` the population is written
  after every round (``checkpoints.py``) and ``resume=True`` continues from
  the newest checkpoint, ending identical to an uninterrupted search.

A first Ctrl-C or SIGTERM lets the running round finish and stops there; a
second one stops at once. Either way the members trained so far are
returned (``SweepResult.interrupted``).
"""

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax

from ondevice_rl.devices.sharding import make_mesh
from ondevice_rl.train.kit.registry import algorithm_of
from ondevice_rl.train.services.interrupt import stop_at_boundary
from ondevice_rl.train.services.memory import check_member_fits
from ondevice_rl.train.services.progress import ProgressBar, to_stderr
from ondevice_rl.train.sweep.halving import Halving
from ondevice_rl.train.sweep.pbt import PBT
from ondevice_rl.train.sweep.plan import ENV_PREFIX, Member, SweepPlan, build_plan
from ondevice_rl.train.sweep.programs import (
    DEFAULT_CACHE,
    budget_of,
    check_fits,
    program_config,
)
from ondevice_rl.train.sweep.result import SweepResult
from ondevice_rl.train.sweep.rounds import Run, search_setup, train_chunks, train_search
from ondevice_rl.train.sweep.space import SweepSpecError

STRATEGIES = {"pbt": PBT, "halving": Halving}
#: A score is the mean return of this many last finished episodes.
DEFAULT_SCORE_EPISODES = 20
#: Rounds of a search when ``round_updates`` is not given.
DEFAULT_ROUNDS = 20
#: ``on_chunk(result, group_index, chunk_index)`` after each population ends.
ChunkCallback = Callable[[SweepResult, int, int], None]
#: ``on_round(result, round)`` after each round of a search (and its checkpoint).
RoundCallback = Callable[[SweepResult, int], None]


def strategy_of(strategy: Any) -> Any:
    """A strategy object from itself or its name (``pbt``, ``halving``)."""
    if isinstance(strategy, str):
        if strategy not in STRATEGIES:
            raise SweepSpecError(
                f"unknown strategy {strategy!r}; known: {', '.join(STRATEGIES)}"
            )
        return STRATEGIES[strategy]()
    return strategy


def default_round_updates(num_updates: int) -> int:
    """Updates per round of a search when none are given: about
    ``DEFAULT_ROUNDS`` rounds."""
    return -(-num_updates // DEFAULT_ROUNDS)


def round_lengths(num_updates: int, round_updates: int | None) -> list[int]:
    """Updates per round: ``round_updates`` each (default about
    ``DEFAULT_ROUNDS`` rounds), the last one shorter if they do not divide."""
    if round_updates is None:
        round_updates = default_round_updates(num_updates)
    if round_updates < 1:
        raise SweepSpecError(f"round updates must be >= 1, got {round_updates}")
    full, rest = divmod(num_updates, round_updates)
    return [round_updates] * full + ([rest] if rest else [])


def group_members(members: Sequence[Member]) -> list[tuple[Any, list[Member]]]:
    """Members by static config, in order of first appearance."""
    groups: dict[Any, list[Member]] = {}
    for m in members:
        groups.setdefault(program_config(m.config), []).append(m)
    return list(groups.items())


def check_plan(
    plan: SweepPlan,
    strategy: Any = None,
    *,
    round_updates: int | None = None,
    score_episodes: int = DEFAULT_SCORE_EPISODES,
    checkpoints: Path | None = None,
    memory_budget_bytes: int | None = None,
    mesh: Any = None,
) -> tuple[Any, list[int], bool]:
    """``(strategy, updates per round, whether the plan trains as one
    population in rounds)``, or a one-line ``SweepSpecError`` for what it
    cannot run (before anything compiles; see ``run_plan``)."""
    strategy = strategy_of(strategy)
    in_rounds = strategy is not None or round_updates is not None
    in_rounds |= checkpoints is not None
    if score_episodes < 1:
        raise SweepSpecError(f"score episodes must be >= 1, got {score_episodes}")
    config = plan.members[0].config
    updates = config.num_updates
    lengths = round_lengths(updates, round_updates if in_rounds else updates)
    if not in_rounds:
        return strategy, lengths, False
    what = f"{strategy.name} search" if strategy else "population in rounds"
    static = [k for k in plan.swept if k in algorithm_of(plan.base).static_fields]
    if static:
        raise SweepSpecError(
            f"a {what} is one program: static fields take one value "
            f"({', '.join(static)} varies)"
        )
    env = [k for k in plan.swept if k.startswith(ENV_PREFIX)]
    if strategy is not None and env:
        raise SweepSpecError(
            f"a {what} explores hyperparameters; env params take one value "
            f"({', '.join(env)} varies)"
        )
    if strategy is not None:
        strategy.check(len(plan.members) // len(plan.seeds), len(lengths))
    mesh = make_mesh() if mesh is None else mesh
    name = strategy.name if strategy else "random search"
    check_fits(config, len(plan.members), mesh, memory_budget_bytes, name)
    return strategy, lengths, True


def run_sweep(
    config: Any,
    seeds: int | Sequence[int] = 1,
    search: Mapping[str, Any] | None = None,
    env_params: Mapping[str, Any] | None = None,
    *,
    samples: int | None = None,
    sample_seed: int = 0,
    **kwargs: Any,
) -> SweepResult:
    """Trains a population: every setting of ``search`` × ``env_params``, per
    seed, in one round (a sweep) or, with a ``strategy``, ``round_updates``
    or ``checkpoints``, as one program in rounds (a search).

    Args:
        config: base config of any registered algorithm (``PPOConfig``,
            ``A2CConfig``, ...).
        seeds: a count ``n`` (seeds ``0..n-1``) or explicit seeds; each is
            one group (one search of its own).
        search: config field → list (grid), ``Uniform``/``LogUniform``
            (random, hyperparameters only) or scalar. Static fields (shapes,
            loop lengths) form groups compiled separately (sweeps only).
        env_params: env params field (e.g. ``"length"``) → the same.
        samples, sample_seed: number and seed of random draws (per group);
            ``sample_seed`` also seeds a strategy's own random choices.
        **kwargs: ``run_plan``'s: ``strategy`` (``"pbt"``, ``"halving"``, a
            ``PBT``/``Halving`` with its settings), ``round_updates``,
            ``score_episodes``, ``solo_keys``, ``chunk_size``,
            ``memory_budget_bytes``, ``mesh``, ``cache``, ``checkpoints``,
            ``resume``, ``progress``, ``on_chunk``, ``on_round``.

    Returns:
        ``SweepResult``: per-member metrics ``[updates]`` and final
        parameters, a ranking of settings, how many programs were compiled
        and, in rounds, the lineage with each group's handed-back member.

    Raises:
        SweepSpecError: an invalid search, or a search that does not fit as
            one program (before anything is compiled).
    """
    plan = build_plan(config, seeds, search, env_params, samples, sample_seed)
    return run_plan(plan, sample_seed=sample_seed, **kwargs)


def run_plan(
    plan: SweepPlan,
    *,
    strategy: Any = None,
    round_updates: int | None = None,
    score_episodes: int = DEFAULT_SCORE_EPISODES,
    solo_keys: bool | None = None,
    sample_seed: int = 0,
    chunk_size: int | None = None,
    memory_budget_bytes: int | None = None,
    mesh: Any = None,
    cache: Any = None,
    checkpoints: Path | None = None,
    resume: bool = False,
    finished: Mapping[int, dict] | None = None,
    chunk_sizes: Mapping[Any, int] | None = None,
    progress: bool | str = False,
    on_chunk: ChunkCallback | None = None,
    on_round: RoundCallback | None = None,
) -> SweepResult:
    """Trains every member of ``plan`` (see ``run_sweep`` and the module
    docstring).

    Args:
        solo_keys: a member starts from ``key(seed)`` (default: unless a
            strategy acts); else from ``fold_in(key(seed), place)``.
        chunk_size: members per compiled call (sweeps); default from the
            memory rule, within ``memory_budget_bytes`` per device (default
            ``memory_budget(mesh)``).
        mesh: 1-D device mesh for the member axis; default every device of
            every process (``ondevice_rl.devices.sharding.make_mesh``).
        cache: compiled programs to reuse; default the process-wide cache.
        checkpoints: a directory for a search's round checkpoints; with
            ``resume``, the newest one that verifies is continued.
        finished: members already trained (index -> metrics, from an
            earlier, interrupted sweep of the same plan), not trained again.
        chunk_sizes: static config -> members per call, e.g. the earlier
            run's: a member's numbers depend on the size of the chunk it is
            vmapped in (not on the other members), so a resumed sweep
            matches the uninterrupted one exactly.
        progress: a progress bar on stderr (process 0 only), titled by the
            string if one is given.
        on_chunk, on_round: called after each population ends and after
            each round of a search, with the result so far.
    """
    mesh = make_mesh() if mesh is None else mesh
    strategy, lengths, in_rounds = check_plan(
        plan,
        strategy,
        round_updates=round_updates,
        score_episodes=score_episodes,
        checkpoints=checkpoints,
        memory_budget_bytes=memory_budget_bytes,
        mesh=mesh,
    )
    cache = DEFAULT_CACHE if cache is None else cache
    run = Run(plan, strategy, lengths, mesh, cache, score_episodes)
    solo_keys = strategy is None if solo_keys is None else solo_keys
    for index, metrics in (finished or {}).items():
        run.result.metrics[index] = metrics
    if in_rounds:
        setup = search_setup(run, solo_keys, sample_seed)
    else:
        budget = memory_budget_bytes
        if budget is None and chunk_size is None:
            budget = budget_of(run.mesh, None)
        todo = [m for m in plan.members if run.result.metrics[m.index] is None]
        groups = group_members(todo)
        if budget is not None:  # a member that cannot fit is refused before any runs
            for config, _ in groups:
                check_member_fits(config, budget, "one member")
    compiles_before, start = run.cache.compiles, time.perf_counter()
    show = bool(progress) and jax.process_index() == 0
    if in_rounds:
        title = f"{strategy.name} search" if strategy else "random search"
        total, unit, boundary = len(lengths), "rounds", "round"
    else:
        title, total, unit, boundary = "sweep", len(plan.members), "members", "chunk"
    title = progress if isinstance(progress, str) else title
    stop_message = f"stopping after the running {boundary} (Ctrl-C again to stop now)"
    try:
        with (
            stop_at_boundary(to_stderr, stop_message) as run.stop,
            ProgressBar(total, title, unit, show) as run.bar,
        ):
            if in_rounds:
                train_search(run, setup, checkpoints, resume, on_round, compiles_before)
            else:
                run.bar.skip(len(finished or {}))
                train_chunks(
                    run, groups, solo_keys, chunk_size, budget, chunk_sizes, on_chunk
                )
            run.bar.describe("done")
    except KeyboardInterrupt:
        run.result.interrupted = True
        run.result.stop_signal = getattr(run.stop, "signal", None)
    run.result.programs_compiled = run.cache.compiles - compiles_before
    run.result.seconds = time.perf_counter() - start
    return run.result
