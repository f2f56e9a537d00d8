"""A population's compiled programs, and how many members one may hold.

The programs that act on a population (``population.py``), each
``jit(vmap(...))`` over members with the member axis split over every
device of a 1-D mesh:

* ``trained(inputs)``: a population trained in one round (a sweep's
  chunk): ``init`` and every update, one program handing back only the
  curves and the final policy parameters;
* ``init(inputs)``, then ``round(population, start, window)`` for each
  round, donating the population (a search);
* ``step(population, seed, round, space, base_hp, coefficients)``: a
  strategy's step between rounds, donating the population.

They live in the process's program cache (``ondevice_rl.train.services.
programs``), keyed by the static config (hyperparameters reset to defaults:
``program_config``), the number of members, the mesh, the round's length
and the key rule; a step also by the strategy's static settings and the
groups' shape. New hyperparameter values, ranges or strategy coefficients
never recompile.

How many members one program holds follows the memory rule of
``ondevice_rl.train.services.memory``: a population trained in one round is
cut into equal chunks (``chunk_program``), reusing a cached program when its
padding wastes at most half its work; one trained in rounds runs as one
program, or is refused in one line naming the largest population that fits
(``check_fits``).
"""

from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh

from ondevice_rl.cpu.flags import compile_lowered
from ondevice_rl.devices.distributed import min_bytes_over_processes
from ondevice_rl.devices.sharding import (
    leading_axis_sharding,
    mesh_size,
    padded_size,
    put_sharded,
    replicated_sharding,
)
from ondevice_rl.train.kit.registry import algorithm_of, trainer_for
from ondevice_rl.train.kit.state import policy_params
from ondevice_rl.train.run.segments import all_finite
from ondevice_rl.train.services.memory import max_chunk_for, memory_budget, plan_chunks
from ondevice_rl.train.services.programs import PROGRAMS, ProgramCache, avals
from ondevice_rl.train.sweep.plan import Member
from ondevice_rl.train.sweep.population import host_inputs, init_fn, round_fn
from ondevice_rl.train.sweep.space import SweepSpecError

#: Sweeps use the process's one program cache unless given their own.
DEFAULT_CACHE = PROGRAMS
#: The score window of a population trained in one round (its score is not
#: handed back).
DEFAULT_WINDOW = 20.0


def program_config(config: Any) -> Any:
    """``config`` with hyperparameters reset to defaults: the compile key."""
    algorithm = algorithm_of(config)
    defaults = algorithm.defaults()
    return config.replace(**{k: defaults[k] for k in algorithm.hyperparam_fields})


@dataclass
class Program:
    """A compiled population program for ``size`` members."""

    compiled: Any  # jax.stages.Compiled
    size: int
    device_bytes: int  # XLA memory analysis: arguments + outputs + temps, per device

    def __call__(self, *args):
        return self.compiled(*args)


def _analysed_bytes(compiled: Any) -> int:
    try:
        stats = compiled.memory_analysis()
    except Exception:  # not every backend implements it
        return 0
    if stats is None:
        return 0
    return int(
        stats.argument_size_in_bytes
        + stats.output_size_in_bytes
        + stats.temp_size_in_bytes
    )


def _mesh_key(mesh: Mesh) -> tuple:
    return (tuple(d.id for d in mesh.devices.flat), tuple(mesh.axis_names))


class Programs:
    """The programs of one static config on one mesh, from ``cache``;
    ``solo_keys``: a member starts from ``key(seed)`` (see ``init_fn``)."""

    def __init__(self, config: Any, mesh: Mesh, cache: ProgramCache, solo_keys: bool):
        self.config = program_config(config)
        self.mesh, self.cache, self.solo_keys = mesh, cache, solo_keys
        self.pop_sharding = leading_axis_sharding(mesh)
        self.replicated = replicated_sharding(mesh)
        self.key = (self.config, _mesh_key(mesh))

    def place(self, tree: Any) -> Any:
        """Host leaves ``[P, ...]`` split over the mesh."""
        return put_sharded(tree, self.pop_sharding)

    def replicate(self, value: Any) -> jax.Array:
        """A host array, whole on every device."""
        return put_sharded(np.asarray(value), self.replicated)

    def inputs_like(self, size: int) -> Any:
        """``init``'s inputs for ``size`` members (shapes only matter)."""
        template = [Member(0, 0, 0, self.config, ())] * size
        defaults = trainer_for(self.config).default_env_params
        return host_inputs(template, defaults, np.zeros(size, np.int32))

    def pop_like(self, size: int) -> Any:
        """The population's shapes (``ShapeDtypeStruct`` tree)."""
        return jax.eval_shape(init_fn(self.config), self.inputs_like(size))

    def _get(self, key: tuple, fn, args, in_shardings, out_shardings, donate):
        """The program under ``key``, compiled on first use: ``jit(fn)``
        for ``args()``'s shapes (host arrays or shapes; called only then)."""

        def build(options):
            shaped = [
                jax.tree.map(
                    lambda x, s=s: jax.ShapeDtypeStruct(
                        np.shape(x), x.dtype, sharding=s
                    ),
                    a,
                )
                for a, s in zip(args(), in_shardings, strict=True)
            ]
            jitted = jax.jit(
                fn(),
                in_shardings=in_shardings,
                out_shardings=out_shardings,
                donate_argnums=donate,
            )
            size = np.shape(jax.tree.leaves(shaped[0])[0])[0]
            devices = mesh_size(self.mesh)
            lowered = jitted.lower(*shaped)
            compiled = compile_lowered(lowered, size // devices, devices, options)
            return Program(compiled, size, _analysed_bytes(compiled))

        return self.cache.get(key, build)

    def trained(self, size: int, length: int) -> Program:
        """``init`` and one round of ``length`` updates as one program,
        handing back only what the host keeps: ``(curves, final policy
        parameters, whether they are finite)``."""

        def fn():
            init = init_fn(self.config, self.solo_keys)
            whole = round_fn(self.config, length)

            def trained(inputs):
                pop = whole(init(inputs), 0, DEFAULT_WINDOW)
                params = policy_params(pop.state)
                return pop.curves, params, jax.vmap(all_finite)(params)

            return trained

        return self._get(
            ("population-trained", *self.key, size, length, self.solo_keys),
            fn,
            lambda: (self.inputs_like(size),),
            (self.pop_sharding,),
            self.pop_sharding,
            (),
        )

    def init(self, size: int) -> Program:
        """A population before its first round."""
        return self._get(
            ("population-init", *self.key, size, self.solo_keys),
            lambda: init_fn(self.config, self.solo_keys),
            lambda: (self.inputs_like(size),),
            (self.pop_sharding,),
            self.pop_sharding,
            (),
        )

    def round(self, size: int, length: int) -> Program:
        """A round of ``length`` updates of a population already trained."""
        return self._get(
            ("population-round", *self.key, size, length),
            lambda: round_fn(self.config, length),
            lambda: (self.pop_like(size), np.int32(0), np.float32(0)),
            (self.pop_sharding, self.replicated, self.replicated),
            self.pop_sharding,
            (0,),
        )

    def step(self, strategy: Any, shape: tuple, rounds: int, extras: tuple):
        """``strategy``'s step for ``shape = (size, groups, group_size)``;
        ``extras``: its host inputs but the population."""
        size, groups, group_size = shape
        key = ("population-step", *self.key, shape, strategy.static_key(), rounds)
        return self._get(
            (*key, avals(extras)),  # a longer list of choices is another program
            lambda: strategy.step_fn(
                self.config, groups, group_size, rounds, self.mesh
            ),
            lambda: (self.pop_like(size), *extras),
            (self.pop_sharding,) + (self.replicated,) * len(extras),
            (self.pop_sharding, self.pop_sharding),
            (0,),
        )

    def reusable(self, members: int, max_chunk: int, length: int) -> Program | None:
        """A cached ``trained`` program of at most ``max_chunk`` members
        whose padding wastes at most half its work (the least wasteful one)."""
        best = None
        for key, program in self.cache.entries():
            if key[:3] != ("population-trained", *self.key):
                continue
            if (key[4], key[5]) != (length, self.solo_keys) or key[3] > max_chunk:
                continue
            padded = -(-members // key[3]) * key[3]
            if padded <= 2 * members and (best is None or padded < best[0]):
                best = (padded, program)
        return None if best is None else best[1]


def budget_of(mesh: Mesh, budget: int | None) -> int:
    """``budget`` or, by default, the smallest free memory over the
    processes (every process must size its programs alike)."""
    return min_bytes_over_processes(memory_budget(mesh)) if budget is None else budget


def chunk_program(
    programs: Programs,
    members: int,
    length: int,
    chunk_size: int | None,
    budget: int | None,
    exact: int | None = None,
) -> tuple[Program, int]:
    """``(trained program, estimated bytes per member)`` for ``members`` trained
    in one round: ``exact`` members a call (a resumed sweep's), or
    ``chunk_size`` (at most the padded group), else the memory rule's chunks
    (a cached program reused where it wastes little)."""
    mesh, config = programs.mesh, programs.config
    num_devices = mesh_size(mesh)
    if exact is not None or chunk_size is not None:
        size = exact or min(
            padded_size(chunk_size, num_devices), padded_size(members, num_devices)
        )
        est = max_chunk_for(config, mesh, budget or 1 << 62)[1]
        return programs.trained(size, length), est
    max_chunk, est = max_chunk_for(config, mesh, budget)
    program = programs.reusable(members, max_chunk, length)
    if program is not None:
        return program, est
    plan = plan_chunks(members, max_chunk, num_devices)
    program = programs.trained(plan.chunk_size, length)
    per_device = program.size // num_devices
    if program.device_bytes > budget and per_device > 1:
        # The estimate was too low: size chunks from XLA's own figure instead.
        measured = program.device_bytes / per_device
        max_chunk = max(1, int(budget // measured)) * num_devices
        plan = plan_chunks(members, max_chunk, num_devices)
        program = programs.trained(plan.chunk_size, length)
    return program, est


def check_fits(config: Any, members: int, mesh: Mesh, budget: int | None, name: str):
    """The population as one program under the memory rule, or a one-line
    refusal naming the largest population that fits."""
    budget = budget_of(mesh, budget)
    most, per_member = max_chunk_for(config, mesh, budget)
    if padded_size(members, mesh_size(mesh)) > most:
        raise SweepSpecError(
            f"a {name} population runs as one program: {members} members need "
            f"about {per_member * members / 2**30:.2f} GiB ({per_member / 2**20:.1f}"
            f" MiB each) but {budget * mesh_size(mesh) / 2**30:.2f} GiB are free "
            f"on {mesh_size(mesh)} device(s); the largest population that fits is "
            f"{most} members"
        )
