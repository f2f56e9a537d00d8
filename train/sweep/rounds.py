"""How each population of a run trains, and what comes back of it.

``train_chunks`` (a sweep): each static group's members in equal chunks,
each chunk a population trained in one round by one program (``init`` and
every update), its members' curves and final parameters collected into the
result as it ends. ``search_setup`` and ``train_search`` (a search): one
population, ``init`` then round after round on the device; after each, the
strategy's step (without one, nothing), the round's record (``Lineage``)
and its checkpoint. A search resumes from the newest checkpoint that
verifies, and its latest population is collected even when it is stopped.
"""

import time
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from ondevice_rl.devices.sharding import mesh_size, padded_size, to_host
from ondevice_rl.train.kit.registry import trainer_for
from ondevice_rl.train.kit.state import policy_params
from ondevice_rl.train.services.interrupt import wait_ready
from ondevice_rl.train.sweep import checkpoints as saved
from ondevice_rl.train.sweep.lineage import Lineage
from ondevice_rl.train.sweep.plan import Member
from ondevice_rl.train.sweep.population import host_inputs, host_record
from ondevice_rl.train.sweep.programs import Programs, chunk_program, program_config
from ondevice_rl.train.sweep.result import GroupInfo, SweepResult
from ondevice_rl.train.sweep.space import SearchSpace

#: How often a wait for the device looks (seconds): short, as rounds may be
#: short and the time between rounds is measured.
POLL_S = 0.001


def strategy_seed(sample_seed: int) -> int:
    """The seed of a search's own random choices (donors, explore, refills)."""
    return (sample_seed * 1_000_003 + 0x5EA4C4) % 2**32


class Run:
    """What every population of one run shares while it trains."""

    def __init__(self, plan, strategy, lengths, mesh, cache, score_episodes: int):
        self.plan, self.strategy, self.lengths = plan, strategy, lengths
        self.mesh, self.cache = mesh, cache
        self.config = plan.members[0].config  # a search's: the base, fixed changes
        self.result = SweepResult(plan, [None] * len(plan.members))
        self.score_episodes = score_episodes
        self.stop = self.bar = None

    def collect(self, members: list[Member], curves, params, finite, updates: int):
        """``members``' curves (their first ``updates``), final parameters
        and whether those are finite, from the first rows of host arrays."""
        for j, m in enumerate(members):
            if updates:
                metrics = {k: v[j, :updates] for k, v in curves.items()}
                self.result.metrics[m.index] = metrics
            self.result.params[m.index] = jax.tree.map(lambda x, j=j: x[j], params)
            self.result.params_finite[m.index] = bool(finite[j])


def train_chunks(run, groups, solo_keys, chunk_size, budget, chunk_sizes, on_chunk):
    """Each static group's members in chunks, each chunk a population
    trained in one round by one program."""
    result = run.result
    for g, (config, members) in enumerate(groups):
        length = config.num_updates  # static groups may differ in it
        label = f"group {g + 1}/{len(groups)}"
        run.bar.describe(f"{label}: compiling")
        compiled_before = run.cache.compiles
        programs = Programs(config, run.mesh, run.cache, solo_keys)
        program, est = chunk_program(
            programs, len(members), length, chunk_size, budget,
            (chunk_sizes or {}).get(config),
        )  # fmt: skip
        num_chunks = -(-len(members) // program.size)
        result.groups.append(
            GroupInfo(
                g,
                config,
                len(members),
                program.size,
                num_chunks,
                run.cache.compiles > compiled_before,
                est,
                program.device_bytes,
            )
        )
        defaults = trainer_for(config).default_env_params
        for c in range(num_chunks):
            if run.stop():
                raise KeyboardInterrupt
            run.bar.describe(f"{label}: chunk {c + 1}/{num_chunks}")
            chunk = members[c * program.size : (c + 1) * program.size]
            padding = program.size - len(chunk)
            groups_of = [run.plan.seeds.index(m.seed) for m in chunk] + [-1] * padding
            inputs = host_inputs(chunk + chunk[:1] * padding, defaults, groups_of)
            trained = to_host(program(programs.place(inputs)))
            run.collect(chunk, *trained, length)
            run.bar.advance(len(chunk))
            if on_chunk is not None:
                on_chunk(result, g, c)


class Search(NamedTuple):
    """A search's population before its first round."""

    programs: Programs
    inputs: Any  # init's host inputs, [size] leading axes
    extras: tuple  # the step's host inputs but the population
    shape: tuple  # (size, groups, members per group)


def search_setup(run, solo_keys, sample_seed) -> Search:
    """The search's population and programs (nothing compiled yet); its
    lineage started."""
    plan, config, strategy = run.plan, run.config, run.strategy
    size = padded_size(len(plan.members), mesh_size(run.mesh))
    padding = size - len(plan.members)
    group = np.concatenate([plan.groups, np.full(padding, -1, np.int32)])
    group_size = len(plan.members) // len(plan.seeds)
    members = list(plan.members) + [plan.members[0]] * padding
    defaults = trainer_for(program_config(config)).default_env_params
    brackets = strategy.brackets_of(group_size) if strategy else None
    inputs = host_inputs(members, defaults, group, brackets)
    run.result.lineage = Lineage(
        strategy, run.lengths, plan.groups, run.score_episodes, config.steps_per_update
    )
    extras = ()
    if strategy is not None:
        space = SearchSpace.build(config, plan.search)
        seed = np.uint32(strategy_seed(sample_seed))
        extras = (seed, np.int32(0), space, config.hyperparams, strategy.coefficients())
        extras = jax.tree.map(np.asarray, extras)
    programs = Programs(config, run.mesh, run.cache, solo_keys)
    return Search(programs, inputs, extras, (size, len(plan.seeds), group_size))


def _restored(search: Search, lineage: Lineage, checkpoints: Path | None):
    """``(population, rounds done)`` from the newest checkpoint that
    verifies, or ``(None, 0)``."""
    if checkpoints is None:
        return None, 0
    done, path, lineage.notes = saved.latest_round(checkpoints)
    if path is None:
        return None, 0
    like = search.programs.pop_like(search.shape[0])
    host_pop, arrays = saved.load_round(path, jax.eval_shape(saved.keys_as_data, like))
    lineage.restore(arrays, done)
    return saved.keys_wrapped(search.programs.place(host_pop), like), done


def train_search(run, search, checkpoints, resume, on_round, compiles_before):
    """The search's rounds (after its newest checkpoint, resuming), the
    strategy's step between them, each round recorded and checkpointed;
    the latest population is collected even when the search is stopped."""
    programs, lineage, lengths = search.programs, run.result.lineage, run.lengths
    size = search.shape[0]
    pop, done = _restored(search, lineage, checkpoints) if resume else (None, 0)
    if pop is None:
        pop = programs.init(size)(programs.place(search.inputs))
    step = None
    if run.strategy is not None and done < len(lengths) - 1:
        step = programs.step(run.strategy, search.shape, len(lengths), search.extras)
    rounds = {n: programs.round(size, n) for n in set(lengths[done:])}
    run.result.programs_compiled = run.cache.compiles - compiles_before
    extras = list(jax.tree.map(programs.replicate, search.extras))
    window = programs.replicate(np.float32(run.score_episodes))
    run.bar.skip(done)
    try:
        for r in range(done, len(lengths)):
            if run.stop():
                raise KeyboardInterrupt
            run.bar.describe(f"round {r + 1}/{len(lengths)}")
            started = time.perf_counter()
            first = programs.replicate(np.int32(sum(lengths[:r])))
            pop = rounds[lengths[r]](pop, first, window)
            wait_ready(pop.score, POLL_S)
            trained = time.perf_counter()
            if step is not None and r + 1 < len(lengths):  # not after the last
                extras[1] = programs.replicate(np.int32(r))
                pop, record = step(pop, *extras)
                record = to_host(wait_ready(record, POLL_S))
            else:
                record = host_record(pop)
            lineage.add_round(record, trained - started, time.perf_counter() - trained)
            if checkpoints is not None:
                _checkpoint(checkpoints, pop, lineage, r + 1)
            run.bar.advance(1)
            if on_round is not None:
                on_round(run.result, r)
    finally:
        curves, params, hp = to_host((pop.curves, policy_params(pop.state), pop.hp))
        p = len(run.plan.members)
        lineage.hp = {k: np.asarray(v)[:p] for k, v in hp._asdict().items()}
        finite = [_finite(jax.tree.map(lambda x, i=i: x[i], params)) for i in range(p)]
        run.collect(
            list(run.plan.members), curves, params, finite, lineage.updates_done
        )


def _finite(params: Any) -> bool:
    """Whether every float leaf of ``params`` (host arrays) is finite."""
    leaves = jax.tree.leaves(params)
    return all(
        np.isfinite(x).all() for x in leaves if np.issubdtype(x.dtype, np.inexact)
    )


def _checkpoint(out: Path, pop: Any, lineage: Lineage, done: int) -> None:
    """Round ``done``'s checkpoint: every process joins the gather, the
    main one writes."""
    host = to_host(saved.keys_as_data(pop))
    if jax.process_index() == 0:
        saved.save_round(out, done, host, lineage.arrays())
