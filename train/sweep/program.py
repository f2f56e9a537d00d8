"""One compiled program per static config: ``jit(vmap(train))`` over members.

The population pytree (``PopulationInputs``) has a leading member axis on
every leaf: seeds, every ``Hyperparams`` field and every env params leaf, so
the program's signature is the same whatever was swept, and new values (or a
new mix of swept fields) reuse the compiled program.

Memory rule (chunking). Before compiling, ``estimate_member_bytes`` sizes one
member from its config with ``jax.eval_shape`` (train state, one rollout's
trajectory, minibatch activations, metrics) and ``memory_budget`` gives the
bytes free per device (``device.memory_stats()``, or on CPU the host's
``MemAvailable`` shared by its local devices, times ``fraction``). A chunk
holds ``budget // bytes_per_member`` members per device; the population is cut
into ``n = ceil(P / max_chunk)`` chunks of equal size ``ceil(P / n)`` rounded
up to a multiple of the device count, the last one padded with copies of a
member, so one compile serves every chunk. After compiling, XLA's own
``memory_analysis()`` is checked against the budget and the chunk shrunk (one
recompile) if the estimate was too low. A cached program of the same config
is reused instead when it fits the budget and wastes at most half its work on
padding.
"""

import math
import os
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

import jax
import numpy as np
from jax.sharding import Mesh

from ondevice_rl import envs
from ondevice_rl.rollout import rollout
from ondevice_rl.sharding import (
    leading_axis_sharding,
    local_device_count,
    mesh_size,
    padded_size,
    shard_leading,
    to_host,
)
from ondevice_rl.train.ppo.config import HYPERPARAM_FIELDS, Hyperparams, PPOConfig
from ondevice_rl.train.ppo.loop import METRIC_NAMES, make_train, make_trainer
from ondevice_rl.train.sweep.space import Member

_TRACES = 0


def trace_count() -> int:
    """How many times a population program has been traced in this process."""
    return _TRACES


class PopulationInputs(NamedTuple):
    """Host arrays, leading member axis ``[P]`` on every leaf."""

    seed: np.ndarray  # [P] int32; member key = jax.random.key(seed)
    hp: Hyperparams  # leaves [P] float32
    env_params: Any  # the env's params NamedTuple, leaves [P, ...]


def program_config(config: PPOConfig) -> PPOConfig:
    """``config`` with hyperparameters reset to defaults: the compile key."""
    defaults = {f.name: f.default for f in fields(PPOConfig)}
    return config.replace(**{name: defaults[name] for name in HYPERPARAM_FIELDS})


def stack_inputs(members: list[Member], default_env_params: Any) -> PopulationInputs:
    """Stacks members (all of one static config) into ``PopulationInputs``."""
    seed = np.asarray([m.seed for m in members], np.int32)
    hp = Hyperparams(
        *(
            np.asarray([getattr(m.config, name) for m in members], np.float32)
            for name in HYPERPARAM_FIELDS
        )
    )

    def member_params(m: Member):
        params = default_env_params
        if m.env_params:
            params = params._replace(**dict(m.env_params))
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


def member_program(config: PPOConfig):
    """``member(seed, hp, env_params) -> metrics`` (``[num_updates]`` each)."""
    train = make_train(config)

    def member(seed, hp, env_params):
        global _TRACES
        _TRACES += 1  # Python side effect: runs once per trace, never on device
        return train(jax.random.key(seed), hp, env_params).metrics

    return member


# --- memory --------------------------------------------------------------------


def _tree_bytes(tree: Any) -> int:
    # PRNG key arrays have an extended dtype; count them as 2 uint32 words.
    return sum(
        math.prod(x.shape)
        * (
            8
            if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)
            else np.dtype(x.dtype).itemsize
        )
        for x in jax.tree.leaves(tree)
    )


def estimate_member_bytes(config: PPOConfig) -> int:
    """Rough peak device bytes of one member (shapes only; nothing compiled).

    ``2·state + 3·trajectory + 4·params + activations + 2·metrics``: the scan
    carry is double-buffered, the trajectory is flattened and shuffled into
    minibatches, gradients/updates/Adam moments each match the params, and a
    minibatch's forward/backward keeps about ``6·M·(obs + 2·Σhidden)`` floats.
    """
    trainer = make_trainer(config)
    hp = config.hyperparams
    state = jax.eval_shape(trainer.init, jax.random.key(0), hp)

    def collect(state):
        return rollout(
            trainer.env,
            trainer.default_env_params,
            trainer.network.apply,
            state.params,
            state.rollout,
            config.num_steps,
        )[1]

    traj = jax.eval_shape(collect, state)
    obs_dim = math.prod(state.rollout.obs.shape[1:])
    activations = 4 * 6 * config.minibatch_size * (obs_dim + 2 * sum(config.hidden))
    metrics = 4 * config.num_updates * len(METRIC_NAMES)
    return int(
        2 * _tree_bytes(state)
        + 3 * _tree_bytes(traj)
        + 4 * _tree_bytes(state.params)
        + activations
        + 2 * metrics
    )


def _host_available_bytes() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return 4 << 30


def memory_budget(mesh: Mesh, fraction: float = 0.5) -> int:
    """Bytes a population chunk may use per device of ``mesh``.

    Accelerators: ``fraction`` of the smallest ``bytes_limit - bytes_in_use``
    among this process's devices. CPU (no memory stats): ``fraction`` of the
    host's available memory, split between its local devices.
    """
    pid = jax.process_index()
    local = [d for d in mesh.devices.flat if d.process_index == pid]
    free = []
    for device in local:
        stats = device.memory_stats() or {}
        if "bytes_limit" in stats:
            free.append(stats["bytes_limit"] - stats.get("bytes_in_use", 0))
    if free:
        return int(fraction * min(free))
    return int(fraction * _host_available_bytes() / max(1, local_device_count(mesh)))


class ChunkPlan(NamedTuple):
    chunk_size: int  # members per compiled call, a multiple of the device count
    num_chunks: int

    @property
    def padded(self) -> int:
        return self.chunk_size * self.num_chunks


def plan_chunks(
    num_members: int, max_chunk: int, num_devices: int, chunk_size: int | None = None
) -> ChunkPlan:
    """Equal chunks of at most ``max_chunk`` members (see the module docstring).

    An explicit ``chunk_size`` is only rounded up to a multiple of the devices.
    """
    if chunk_size is None:
        max_chunk = max(num_devices, max_chunk // num_devices * num_devices)
        num_chunks = -(-num_members // max_chunk)
        chunk_size = -(-num_members // num_chunks)
    chunk_size = padded_size(chunk_size, num_devices)
    return ChunkPlan(chunk_size, -(-num_members // chunk_size))


def max_chunk_for(config: PPOConfig, mesh: Mesh, budget: int | None) -> tuple[int, int]:
    """``(max members per chunk, estimated bytes per member)`` under ``budget``
    (bytes per device; default ``memory_budget(mesh)``)."""
    budget = memory_budget(mesh) if budget is None else budget
    per_member = max(1, estimate_member_bytes(config))
    return max(1, budget // per_member) * mesh_size(mesh), per_member


# --- compiled programs ------------------------------------------------------------


@dataclass
class Program:
    """A compiled population program for ``chunk_size`` members on ``mesh``."""

    config: PPOConfig
    chunk_size: int
    mesh: Mesh
    compiled: Any  # jax.stages.Compiled
    device_bytes: int  # XLA memory analysis: arguments + outputs + temps, per device

    def __call__(self, inputs: PopulationInputs) -> dict[str, np.ndarray]:
        """Runs ``chunk_size`` members; returns host metrics ``[chunk, U]``."""
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
    config: PPOConfig,
    chunk_size: int,
    mesh: Mesh,
    compiler_options: dict[str, Any] | None = None,
) -> Program:
    """Lowers and compiles ``jit(vmap(member))`` for ``chunk_size`` members.

    ``compiler_options`` go to XLA (e.g. ``{"xla_backend_optimization_level":
    0}`` compiles a few times faster on CPU and runs a few times slower: worth
    it for tiny populations such as tests).
    """
    config = program_config(config)
    _, default_env_params = envs.make(config.env)
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
    compiled = fn.lower(*abstract).compile(compiler_options=compiler_options)
    return Program(config, chunk_size, mesh, compiled, _analysed_bytes(compiled))


def _mesh_key(mesh: Mesh) -> tuple:
    return (tuple(d.id for d in mesh.devices.flat), tuple(mesh.axis_names))


class ProgramCache:
    """Compiled programs by (static config, chunk size, mesh); counts compiles.

    ``compiler_options`` apply to every program it compiles (see
    ``compile_program``).
    """

    def __init__(self, compiler_options: dict[str, Any] | None = None):
        self._programs: dict[tuple, Program] = {}
        self.compiles = 0
        self.compiler_options = compiler_options

    def __len__(self) -> int:
        return len(self._programs)

    def _options_key(self) -> tuple:
        return tuple(sorted((self.compiler_options or {}).items()))

    def clear(self) -> None:
        self._programs.clear()

    def reusable(
        self, config: PPOConfig, mesh: Mesh, num_members: int, max_chunk: int
    ) -> Program | None:
        """A cached program for ``config`` of at most ``max_chunk`` members whose
        padding wastes at most half its work (the least wasteful one)."""
        config, mesh_key = program_config(config), _mesh_key(mesh)
        best = None
        for (cfg, size, key, options), program in self._programs.items():
            if (cfg, key, options) != (config, mesh_key, self._options_key()):
                continue
            if size > max_chunk:
                continue
            padded = -(-num_members // size) * size
            if padded <= 2 * num_members and (best is None or padded < best[0]):
                best = (padded, program)
        return None if best is None else best[1]

    def get(self, config: PPOConfig, chunk_size: int, mesh: Mesh) -> Program:
        """The program for these arguments, compiled on first use."""
        key = (program_config(config), chunk_size, _mesh_key(mesh), self._options_key())
        if key not in self._programs:
            self._programs[key] = compile_program(
                config, chunk_size, mesh, self.compiler_options
            )
            self.compiles += 1
        return self._programs[key]


#: Shared by every sweep of this process unless one passes its own cache.
DEFAULT_CACHE = ProgramCache()
