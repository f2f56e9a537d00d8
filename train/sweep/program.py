"""One compiled program per static config: ``jit(vmap(train))`` over members.

The population pytree (``PopulationInputs``) has a leading member axis on
every leaf: seeds, every traced hyperparameter and every env params leaf, so
the program's signature is the same whatever was swept, and new values (or a
new mix of swept fields) reuse the compiled program.

Chunk sizes follow the memory rule of ``memory.py``; programs live in the
process's one cache (``ondevice_rl.train.services.programs``), so new values never
recompile.
"""

from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import numpy as np
from jax.sharding import Mesh

from ondevice_rl.cpu.flags import compile_lowered
from ondevice_rl.devices.sharding import (
    leading_axis_sharding,
    mesh_size,
    shard_leading,
    to_host,
)
from ondevice_rl.env.types import replace_params
from ondevice_rl.train.kit.protocol import whole_run
from ondevice_rl.train.kit.registry import algorithm_of, trainer_for
from ondevice_rl.train.kit.state import PolicyParams, policy_params
from ondevice_rl.train.run.segments import all_finite
from ondevice_rl.train.services.programs import PROGRAMS, ProgramCache
from ondevice_rl.train.sweep.space import Member


class PopulationInputs(NamedTuple):
    """Host arrays, leading member axis ``[P]`` on every leaf."""

    seed: np.ndarray  # [P] uint32; member key = jax.random.key(seed)
    hp: Any  # the algorithm's Hyperparams, leaves [P] float32
    env_params: Any  # the env's params NamedTuple, leaves [P, ...]


def program_config(config: Any) -> Any:
    """``config`` with hyperparameters reset to defaults: the compile key."""
    algorithm = algorithm_of(config)
    defaults = algorithm.defaults()
    return config.replace(**{k: defaults[k] for k in algorithm.hyperparam_fields})


def stack_inputs(members: list[Member], default_env_params: Any) -> PopulationInputs:
    """Stacks members (all of one static config) into ``PopulationInputs``."""
    seed = np.asarray([m.seed for m in members], np.uint32)
    hp_class = members[0].config.HYPERPARAMS
    hp = hp_class(
        *(
            np.asarray([getattr(m.config, name) for m in members], np.float32)
            for name in hp_class._fields
        )
    )

    def member_params(m: Member):
        params = default_env_params
        if m.env_params:
            params = replace_params(params, dict(m.env_params))
        return jax.tree.map(
            lambda value, default: np.asarray(value, np.asarray(default).dtype),
            params,
            default_env_params,
        )

    per_member = [member_params(m) for m in members]
    env_params = jax.tree.map(lambda *xs: np.stack(xs), *per_member)
    return PopulationInputs(seed, hp, env_params)


def take(inputs: PopulationInputs, start: int, stop: int) -> PopulationInputs:
    """Members ``start:stop`` of ``inputs``."""
    return jax.tree.map(lambda x: x[start:stop], inputs)


class MemberOutput(NamedTuple):
    """What one member's program hands back (host arrays after the call)."""

    metrics: dict  # name -> [num_updates]
    params: PolicyParams  # the final state's, what acting needs
    params_finite: Any  # [] bool: every final parameter is finite


def member_program(config: Any):
    """``member(seed, hp, env_params) -> MemberOutput``."""
    train = whole_run(trainer_for(config))

    def member(seed, hp, env_params):
        out = train(jax.random.key(seed), hp, env_params)
        params = policy_params(out.state)
        return MemberOutput(out.metrics, params, all_finite(params))

    return member


# --- compiled programs ------------------------------------------------------------


@dataclass
class Program:
    """A compiled population program for ``chunk_size`` members on ``mesh``."""

    config: Any
    chunk_size: int
    mesh: Mesh
    compiled: Any  # jax.stages.Compiled
    device_bytes: int  # XLA memory analysis: arguments + outputs + temps, per device

    def __call__(self, inputs: PopulationInputs) -> MemberOutput:
        """Runs ``chunk_size`` members; returns host arrays, ``[chunk, ...]``."""
        placed = shard_leading(inputs, self.mesh)
        return to_host(self.compiled(*placed))


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


def compile_program(
    config: Any,
    chunk_size: int,
    mesh: Mesh,
    compiler_options: dict[str, Any] | None = None,
) -> Program:
    """Lowers and compiles ``jit(vmap(member))`` for ``chunk_size`` members.

    ``compiler_options`` go to XLA (see ``ProgramCache``).
    """
    config = program_config(config)
    default_env_params = trainer_for(config).default_env_params
    sharding = leading_axis_sharding(mesh)
    template = stack_inputs(
        [Member(0, 0, 0, config, ())] * chunk_size, default_env_params
    )
    abstract = jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), template
    )
    fn = jax.jit(
        jax.vmap(member_program(config)),
        in_shardings=sharding,
        out_shardings=sharding,
    )
    devices = mesh_size(mesh)
    lowered = fn.lower(*abstract)
    compiled = compile_lowered(
        lowered, chunk_size // devices, devices, compiler_options
    )
    return Program(config, chunk_size, mesh, compiled, _analysed_bytes(compiled))


def _mesh_key(mesh: Mesh) -> tuple:
    return (tuple(d.id for d in mesh.devices.flat), tuple(mesh.axis_names))


def population_program(
    cache: ProgramCache, config: Any, chunk_size: int, mesh: Mesh
) -> Program:
    """The program for ``config``'s static fields, ``chunk_size`` members and
    ``mesh``, compiled on first use."""
    key = ("population", program_config(config), chunk_size, _mesh_key(mesh))
    return cache.get(
        key, lambda options: compile_program(config, chunk_size, mesh, options)
    )


def reusable_program(
    cache: ProgramCache, config: Any, mesh: Mesh, num_members: int, max_chunk: int
) -> Program | None:
    """A cached program for ``config`` of at most ``max_chunk`` members whose
    padding wastes at most half its work (the least wasteful one)."""
    config, mesh_key = program_config(config), _mesh_key(mesh)
    best = None
    for key, program in cache.entries():
        if key[0] != "population" or (key[1], key[3]) != (config, mesh_key):
            continue
        size = key[2]
        if size > max_chunk:
            continue
        padded = -(-num_members // size) * size
        if padded <= 2 * num_members and (best is None or padded < best[0]):
            best = (padded, program)
    return None if best is None else best[1]


#: Sweeps use the process's one program cache unless given their own.
DEFAULT_CACHE = PROGRAMS
