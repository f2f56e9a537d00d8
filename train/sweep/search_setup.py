"""A search's setup: its request checked, its population's inputs and its
compiled programs (``search.py`` runs them).

``prepare(plan, search, strategy, ...)`` checks what a search cannot run
(static fields or env params that vary, a strategy's own needs, a population
the memory rule would split) in one line before anything compiles, pads the
population to a multiple of the devices (padding members belong to no
group: no strategy ever looks at them) and gets the three programs from the
process's program cache: ``init``, ``round`` (one per round length) and the
strategy's ``step``. Programs are keyed by the static config, the
population's shape, the mesh and the strategy's static settings: new
hyperparameter values, ranges or strategy coefficients never recompile.
"""

from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import numpy as np
from jax.sharding import Mesh

from ondevice_rl.cpu.flags import compile_lowered
from ondevice_rl.devices.distributed import min_bytes_over_processes
from ondevice_rl.devices.sharding import (
    leading_axis_sharding,
    make_mesh,
    mesh_size,
    padded_size,
    put_sharded,
    replicated_sharding,
)
from ondevice_rl.train.kit.registry import algorithm_of, trainer_for
from ondevice_rl.train.services.memory import max_chunk_for, memory_budget
from ondevice_rl.train.services.programs import ProgramCache, avals
from ondevice_rl.train.sweep import search_store
from ondevice_rl.train.sweep.population import host_inputs, init_fn, round_fn
from ondevice_rl.train.sweep.program import DEFAULT_CACHE, _mesh_key, program_config
from ondevice_rl.train.sweep.search_space import SearchSpace
from ondevice_rl.train.sweep.space import ENV_PREFIX, SweepPlan, SweepSpecError
from ondevice_rl.train.sweep.strategies import STRATEGIES

#: A score is the mean return of this many last finished episodes.
DEFAULT_SCORE_EPISODES = 20
#: Rounds of a search when ``round_updates`` is not given.
DEFAULT_ROUNDS = 20


def strategy_of(strategy: Any) -> Any:
    """A strategy object from itself or its name (``pbt``, ``halving``)."""
    if isinstance(strategy, str):
        if strategy not in STRATEGIES:
            raise SweepSpecError(
                f"unknown strategy {strategy!r}; known: {', '.join(STRATEGIES)}"
            )
        return STRATEGIES[strategy]()
    return strategy


def round_lengths(num_updates: int, round_updates: int | None) -> list[int]:
    """Updates per round: ``round_updates`` each (default about
    ``DEFAULT_ROUNDS`` rounds), the last one shorter if they do not divide."""
    if round_updates is None:
        round_updates = -(-num_updates // DEFAULT_ROUNDS)
    if round_updates < 1:
        raise SweepSpecError(f"round updates must be >= 1, got {round_updates}")
    full, rest = divmod(num_updates, round_updates)
    return [round_updates] * full + ([rest] if rest else [])


def check_request(plan: SweepPlan, strategy: Any, lengths: list[int]) -> int:
    """One-line ``SweepSpecError`` for what a search cannot run (before
    anything compiles); returns the members per group."""
    static = [k for k in plan.swept if k in algorithm_of(plan.base).static_fields]
    if static:
        raise SweepSpecError(
            f"a {strategy.name} search is one program: static fields take one value "
            f"({', '.join(static)} varies)"
        )
    env = [k for k in plan.swept if k.startswith(ENV_PREFIX)]
    if env:
        raise SweepSpecError(
            f"a {strategy.name} search explores hyperparameters; env params take "
            f"one value ({', '.join(env)} varies)"
        )
    group_size = len(plan.members) // len(plan.seeds)
    strategy.check(group_size, len(lengths))
    return group_size


def check_fits(config: Any, members: int, mesh: Mesh, budget: int | None, name: str):
    """The population as one program under the memory rule, or a one-line
    refusal naming the largest population that fits."""
    budget = min_bytes_over_processes(memory_budget(mesh)) if budget is None else budget
    most, per_member = max_chunk_for(config, mesh, budget)
    if padded_size(members, mesh_size(mesh)) > most:
        raise SweepSpecError(
            f"a {name} population runs as one program: {members} members need "
            f"about {per_member * members / 2**30:.2f} GiB ({per_member / 2**20:.1f}"
            f" MiB each) but {budget * mesh_size(mesh) / 2**30:.2f} GiB are free "
            f"on {mesh_size(mesh)} device(s); the largest population that fits is "
            f"{most} members"
        )


class _Programs:
    """The search's compiled programs, from the process's program cache."""

    def __init__(self, config, strategy, plan_shape, mesh, cache, solo_keys):
        self.config, self.mesh, self.solo_keys = config, mesh, solo_keys
        self.pop_sharding = leading_axis_sharding(mesh)
        self.replicated = replicated_sharding(mesh)
        self.cache = cache
        self.strategy, self.plan_shape = strategy, plan_shape
        self.key = (program_config(config), plan_shape, _mesh_key(mesh))

    def _compile(self, fn, args, in_shardings, out_shardings, donate):
        def abstract(x, sharding):
            return jax.ShapeDtypeStruct(np.shape(x), x.dtype, sharding=sharding)

        shaped = [
            jax.tree.map(lambda x, s=s: abstract(x, s), a)
            for a, s in zip(args, in_shardings, strict=True)
        ]
        jitted = jax.jit(
            fn,
            in_shardings=in_shardings,
            out_shardings=out_shardings,
            donate_argnums=donate,
        )

        def build(options):
            devices = mesh_size(self.mesh)
            members = np.shape(jax.tree.leaves(args[0])[0])[0] // devices
            return compile_lowered(jitted.lower(*shaped), members, devices, options)

        return build

    def init(self, inputs):
        build = self._compile(
            init_fn(self.config, self.solo_keys),
            inputs,
            (self.pop_sharding,) * len(inputs),
            self.pop_sharding,
            (),
        )
        return self.cache.get(("search-init", *self.key, self.solo_keys), build)

    def round(self, pop_like, length):
        build = self._compile(
            round_fn(self.config, length),
            (pop_like, np.int32(0), np.float32(0)),
            (self.pop_sharding, self.replicated, self.replicated),
            self.pop_sharding,
            (0,),
        )
        key = ("search-round", *self.key, length)
        return self.cache.get(key, build)

    def step(self, pop_like, extras, rounds):
        groups, group_size = self.plan_shape[1:]
        fn = self.strategy.step_fn(self.config, groups, group_size, rounds, self.mesh)
        build = self._compile(
            fn,
            (pop_like, *extras),
            (self.pop_sharding,) + (self.replicated,) * len(extras),
            (self.pop_sharding, self.pop_sharding),
            (0,),
        )
        shapes = avals(extras)  # a longer list of choices is another program
        key = ("search-step", *self.key, self.strategy.static_key(), rounds, shapes)
        return self.cache.get(key, build)


def keys_as_data(tree: Any) -> Any:
    return jax.tree.map(
        lambda x: jax.random.key_data(x) if search_store.is_key(x) else x, tree
    )


def keys_wrapped(tree: Any, like: Any) -> Any:
    return jax.tree.map(
        lambda x, a: jax.random.wrap_key_data(x) if search_store.is_key(a) else x,
        tree,
        like,
    )


class SearchSetup(NamedTuple):
    """Everything a search runs with, before its first round."""

    config: Any  # the members' static config (the base with fixed changes)
    strategy: Any
    lengths: list[int]  # updates per round
    group: np.ndarray  # [size] int32: each slot's group, -1 for padding
    inputs: list  # init's host inputs, [size] leading axes
    extras: tuple  # the step's host inputs but the population
    programs: "_Programs"
    pop_like: Any  # the population's shapes (ShapeDtypeStruct tree)

    def initial(self) -> Any:
        """The population before the first round, on the mesh."""
        init = self.programs.init(self.inputs)
        return init(*put_sharded(self.inputs, self.programs.pop_sharding))

    def step(self) -> Any:
        return self.programs.step(self.pop_like, self.extras, len(self.lengths))

    def rounds(self) -> dict[int, Any]:
        """Round length -> its compiled round program."""
        return {n: self.programs.round(self.pop_like, n) for n in set(self.lengths)}

    def restored(self, host_pop: Any) -> Any:
        """A checkpointed host population (keys as key data) on the mesh."""
        placed = put_sharded(host_pop, self.programs.pop_sharding)
        return keys_wrapped(placed, self.pop_like)

    @property
    def host_like(self) -> Any:
        """The population's shapes as checkpoints hold it (keys as data)."""
        return jax.eval_shape(keys_as_data, self.pop_like)


def prepare(
    plan: SweepPlan,
    search: Mapping[str, Any],
    strategy: Any,
    *,
    round_updates: int | None = None,
    score_episodes: int = DEFAULT_SCORE_EPISODES,
    memory_budget_bytes: int | None = None,
    mesh: Mesh | None = None,
    cache: ProgramCache | None = None,
    solo_keys: bool = False,
) -> SearchSetup:
    """Checks the request and builds the setup (nothing compiled until a
    program is asked for). ``solo_keys``: each member starts from
    ``key(seed)``, as ``train --seed`` (only for groups of one member)."""
    strategy = strategy_of(strategy)
    config = plan.members[0].config  # the base with its fixed changes
    fields = config.HYPERPARAMS._fields
    search = {k: v for k, v in search.items() if k in fields}  # others are fixed
    lengths = round_lengths(config.num_updates, round_updates)
    group_size = check_request(plan, strategy, lengths)
    if solo_keys and group_size > 1:
        raise SweepSpecError(
            f"members from key(seed) alone need one member per seed, got {group_size}"
        )
    if score_episodes < 1:
        raise SweepSpecError(f"score episodes must be >= 1, got {score_episodes}")
    mesh = make_mesh() if mesh is None else mesh
    cache = DEFAULT_CACHE if cache is None else cache
    members = len(plan.members)
    check_fits(config, members, mesh, memory_budget_bytes, strategy.name)
    size = padded_size(members, mesh_size(mesh))
    groups = len(plan.seeds)
    group = np.asarray([plan.seeds.index(m.seed) for m in plan.members], np.int32)
    padded = list(plan.members) + [plan.members[0]] * (size - members)
    group = np.concatenate([group, np.full(size - members, -1, np.int32)])
    trainer = trainer_for(program_config(config))
    inputs = list(host_inputs(padded, trainer.default_env_params, group))
    # Brackets dealt by a slot's place within its group.
    place = inputs[1][:members]
    inputs[5] = np.concatenate(
        [strategy.brackets_of(group_size)[place], np.zeros(size - members)]
    ).astype(np.int32)
    plan_shape = (size, groups, group_size)
    programs = _Programs(config, strategy, plan_shape, mesh, cache, solo_keys)
    space = SearchSpace.build(config, search)
    extras = (
        np.uint32(0),
        np.int32(0),
        space,
        config.hyperparams,
        strategy.coefficients(),
    )
    extras = jax.tree.map(np.asarray, extras)
    pop_like = jax.eval_shape(init_fn(config), *inputs)
    return SearchSetup(
        config, strategy, lengths, group, inputs, extras, programs, pop_like
    )
