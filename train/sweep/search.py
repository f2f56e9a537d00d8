"""Searches that act on a population between rounds: population-based
training and successive halving (``strategies.py``), run as one program.

``run_search(config, "pbt", seeds=4, search={...}, samples=16)`` trains
``samples`` members per seed (a group per seed: members are compared only
within their group) in rounds of ``round_updates`` updates. After each round
the strategy's jitted step acts on the population on the device; only the
scores and the lineage (who copied whom, hyperparameters) come to the host.
The whole population is one compiled program over every device of the mesh:
if the memory rule would split it, the search is refused in one line naming
the largest population that fits. With ``out``, the population is
checkpointed after every round (``search_store.py``) and ``resume=True``
continues from the newest checkpoint, ending identical to an uninterrupted
search. A first Ctrl-C or SIGTERM finishes the running round, checkpoints
and stops.
"""

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from ondevice_rl.devices.sharding import put_sharded, to_host
from ondevice_rl.train.kit.state import policy_params
from ondevice_rl.train.services.interrupt import stop_at_boundary, wait_ready
from ondevice_rl.train.services.progress import ProgressBar, to_stderr
from ondevice_rl.train.sweep import search_store
from ondevice_rl.train.sweep.search_result import SearchResult
from ondevice_rl.train.sweep.search_setup import (
    DEFAULT_SCORE_EPISODES,
    SearchSetup,
    keys_as_data,
    prepare,
)
from ondevice_rl.train.sweep.space import SweepPlan, build_plan
from ondevice_rl.train.sweep.strategies import RoundRecord

#: How often a wait for the device looks (seconds): short, as rounds may be
#: short and the time between rounds is measured.
POLL_S = 0.001
#: ``on_round(result, round)`` after each round (and its checkpoint).
RoundCallback = Callable[[SearchResult, int], None]


def search_plan(
    plan: SweepPlan,
    search: Mapping[str, Any],
    strategy: Any,
    *,
    progress: bool | str = False,
    out: Path | None = None,
    resume: bool = False,
    on_round: RoundCallback | None = None,
    sample_seed: int = 0,
    **setup: Any,
) -> SearchResult:
    """Runs ``strategy`` over ``plan``'s members (see ``run_search``);
    ``sample_seed`` also seeds the strategy's own random choices; ``setup``
    goes to ``search_setup.prepare`` (``round_updates``, ``score_episodes``,
    ``memory_budget_bytes``, ``mesh``, ``cache``, ``solo_keys``).
    ``progress``: a line per round on stderr, titled ``"<strategy> search"``
    or, given a string, by it."""
    score_episodes = setup.setdefault("score_episodes", DEFAULT_SCORE_EPISODES)
    setup = prepare(plan, search, strategy, **setup)
    cache = setup.programs.cache
    result = SearchResult(
        plan, setup.strategy, setup.lengths, setup.group, score_episodes
    )
    compiles_before, start = cache.compiles, time.perf_counter()
    pop, done = None, 0
    if resume and out is not None:
        done, path, skipped = search_store.latest_round(out)
        result.notes += skipped
        if path is not None:
            host_pop, lineage = search_store.load_round(path, setup.host_like)
            pop = setup.restored(host_pop)
            result.restore_lineage(lineage, done)
            result.resumed_from = done
        done = done or 0
    if pop is None:
        pop = setup.initial()
    setup.step(), setup.rounds()  # compiled before the first round's clock
    result.programs_compiled = cache.compiles - compiles_before
    try:
        pop = _run_rounds(
            setup, pop, result, done, sample_seed, progress, out, on_round
        )
    except KeyboardInterrupt:
        result.interrupted = True
    pop = result.population if result.population is not None else pop
    result.population = None
    result.finish(
        to_host(pop.curves), to_host(policy_params(pop.state)), to_host(pop.hp)
    )
    result.seconds = time.perf_counter() - start
    result.programs_compiled = cache.compiles - compiles_before
    return result


def _run_rounds(
    setup: SearchSetup, pop, result, done, sample_seed, progress, out, on_round
):
    """Rounds ``done + 1 ...``: train, step, record, checkpoint. The latest
    population is kept on ``result.population`` for an interrupted caller."""
    lengths, programs = setup.lengths, setup.programs
    step, rounds = setup.step(), setup.rounds()
    extras = list(put_sharded(setup.extras, programs.replicated))
    seed = np.uint32(strategy_seed(sample_seed))
    show = bool(progress) and jax.process_index() == 0
    title = progress if isinstance(progress, str) else f"{setup.strategy.name} search"
    stop_message = "stopping after the running round"
    with (
        stop_at_boundary(to_stderr, stop_message) as stop,
        ProgressBar(len(lengths), title, "rounds", show) as bar,
    ):
        bar.skip(done)
        for r in range(done, len(lengths)):
            if stop():
                result.stop_signal = stop.signal
                raise KeyboardInterrupt
            bar.describe(f"round {r + 1}/{len(lengths)}")
            t0 = time.perf_counter()
            first = np.int32(sum(lengths[:r]))
            window = _scalar(np.float32(result.score_episodes), programs)
            pop = rounds[lengths[r]](pop, _scalar(first, programs), window)
            result.population = pop
            wait_ready(pop.score, POLL_S)
            t1 = time.perf_counter()
            if r + 1 < len(lengths):  # between rounds, not after the last
                extras[0] = _scalar(seed, programs)
                extras[1] = _scalar(np.int32(r), programs)
                pop, record = step(pop, *extras)
                result.population = pop
                record = to_host(wait_ready(record, POLL_S))
            else:
                record = _last_record(pop)
            result.add_round(record, t1 - t0, time.perf_counter() - t1)
            if out is not None:
                _checkpoint(out, pop, result, r + 1)
            bar.advance(1)
            if on_round is not None:
                on_round(result, r)
    return pop


def _last_record(pop: Any) -> RoundRecord:
    """The last round's record: the population as it ends (no step)."""
    score, finite, hp, trial, rung = to_host(
        (pop.score, pop.finite, pop.hp, pop.trial, pop.rung)
    )
    none = np.full(score.shape, -1, np.int32)
    return RoundRecord(score, finite, none, np.zeros_like(none), hp, trial, rung)


def _checkpoint(out: Path, pop: Any, result: SearchResult, done: int) -> None:
    """Round ``done``'s checkpoint: every process joins the gather, the
    main one writes."""
    host = to_host(keys_as_data(pop))
    if jax.process_index() == 0:
        search_store.save_round(
            out, done, search_store.population_arrays(host), result.lineage_arrays()
        )


def _scalar(value: np.ndarray, programs: Any) -> jax.Array:
    return put_sharded(np.asarray(value), programs.replicated)


def strategy_seed(sample_seed: int) -> int:
    """The seed of a search's own random choices (donors, explore, refills)."""
    return (sample_seed * 1_000_003 + 0x5EA4C4) % 2**32


def run_search(
    config: Any,
    strategy: Any = "pbt",
    seeds: int | Sequence[int] = 1,
    search: Mapping[str, Any] | None = None,
    env_params: Mapping[str, Any] | None = None,
    *,
    samples: int | None = None,
    sample_seed: int = 0,
    **kwargs: Any,
) -> SearchResult:
    """Trains a population that searches as it trains.

    Args:
        config: base config of any registered learner (static fields and
            the hyperparameters not searched).
        strategy: ``"pbt"``, ``"halving"`` (or a ``PBT``/``Halving`` with
            its settings), or ``"random"`` (members trained independently
            in rounds: the baseline).
        seeds: search seeds: each is a group of ``samples`` members (times
            the grid), searched on its own; member ``i`` of a group starts
            from ``fold_in(jax.random.key(seed), i)`` (with ``solo_keys``,
            groups of one member, from ``jax.random.key(seed)``, as ``train
            --seed``).
        search: traced hyperparameter -> ``Uniform``, ``LogUniform`` (with
            ``samples``) or a list of values; the initial population's
            draws and the space explore and refills sample from.
        env_params: env params, one value each (fixed changes).
        samples, sample_seed: random draws per group and their seed.
        **kwargs: ``search_plan``'s: ``round_updates`` (default: about 20
            rounds), ``score_episodes`` (N of the score, default 20),
            ``memory_budget_bytes``, ``mesh``, ``cache``, ``progress``,
            ``out`` (checkpoints), ``resume``, ``on_round``, ``solo_keys``.

    Returns:
        ``SearchResult``: lineage, curves, each group's handed-back member.

    Raises:
        SweepSpecError: a request a search cannot run, or a population that
            does not fit as one program (before anything compiles).
    """
    plan = build_plan(config, seeds, search, env_params, samples, sample_seed)
    return search_plan(
        plan, dict(search or {}), strategy, sample_seed=sample_seed, **kwargs
    )
