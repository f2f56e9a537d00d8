"""Compile one training program for an NVIDIA GPU on a machine without one,
and count what it launches per update (``train/bench/thunks.py``).

Runs as its own process, in the environment ``bench launches`` builds (JAX's
CUDA plugin on ``PYTHONPATH``, ``JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1``,
``XLA_FLAGS=--xla_dump_to=DIR``): XLA compiles for the target described by a
``GpuTargetConfig`` text proto (no autotuning without a device, so every dot
is a Triton GEMM with default tiles) and writes its thunk sequence to DIR.

    python -m ondevice_rl.train.bench.deviceless '{"program": "ours",
        "algo": "ppo", "seeds": 1, "target": "h100.txtpb", "dump": "DIR"}'

Prints one JSON line: ``num_updates``, ``compile_s`` and the counts of
``thunks.per_update``. A reference is a module with ``make_train(timesteps)
-> train(key)`` and ``num_updates(timesteps)`` (``"program":
"reference"``, ``"module"``: a module name or a ``.py`` path).
"""

import importlib
import importlib.util
import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
from jax.experimental import topologies
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from ondevice_rl.train.bench.thunks import load_program, per_update
from ondevice_rl.train.bench.train_speed import bench_config
from ondevice_rl.train.kit.registry import algorithm_of

#: Updates compiled into each program: a trip count no inner loop has, so
#: the update loop is found by it (the counts are per update regardless).
NUM_UPDATES = 11


def _module(name: str):
    if name.endswith(".py"):
        spec = importlib.util.spec_from_file_location(Path(name).stem, name)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    return importlib.import_module(name)


def steady_p_true(config) -> dict[str, list[float]]:
    """Our conditionals left on a GPU (``cond_or_select`` makes the others
    selects), by the function that calls them: the share of updates taking
    the true branch. Only TD3's delayed actor update, every
    ``policy_delay``-th gradient step."""
    delay = getattr(config, "policy_delay", None)
    return {} if delay is None else {"learn_step": [1.0 / delay]}


def _program(spec: dict):
    """``(fn, args, num_updates, p_true)``: the vmapped training function,
    its abstract inputs (``seeds`` keys; our hyperparameters), its updates
    and its conditionals' steady shares (``steady_p_true``; a reference's
    ``CONDITIONALS_P_TRUE``)."""
    seeds = spec["seeds"]
    if spec["program"] == "reference":
        module = _module(spec["module"])
        steps_per_update = 10**6 // module.num_updates(10**6)
        timesteps = NUM_UPDATES * steps_per_update
        fn = jax.vmap(module.make_train(timesteps))
        keys = jax.ShapeDtypeStruct((seeds, 2), jnp.uint32)
        p_true = getattr(module, "CONDITIONALS_P_TRUE", {})
        return fn, (keys,), module.num_updates(timesteps), p_true
    algo, recipe = spec.get("algo", "ppo"), spec.get("recipe")
    config = bench_config(10**7, algo=algo, recipe=recipe)
    config = config.replace(total_timesteps=NUM_UPDATES * config.steps_per_update)
    fn = jax.vmap(algorithm_of(config).make_train(config), in_axes=(0, None))
    keys = jax.ShapeDtypeStruct((seeds, 2), jnp.uint32)
    hp = jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(jnp.shape(x), jnp.asarray(x).dtype),
        config.hyperparams,
    )
    return fn, (keys, hp), config.num_updates, steady_p_true(config)


def compile_and_count(spec: dict) -> dict:
    """Compiles ``spec``'s program for its target; its per-update counts."""
    jax.config.update("jax_enable_compilation_cache", False)
    topology = topologies.get_topology_desc(
        platform="cuda",
        target_config=Path(spec["target"]).read_text(),
        topology="1x1x1",
    )
    mesh = topologies.make_mesh(topology, (1,), ("x",))
    fn, args, num_updates, p_true = _program(spec)
    on_gpu = NamedSharding(mesh, P())
    placed = jax.tree.map(
        lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=on_gpu), args
    )
    t0 = time.perf_counter()
    jax.jit(fn).lower(*placed).compile()
    compile_s = time.perf_counter() - t0
    program = load_program(Path(spec["dump"]), "jit_")
    counts = per_update(program, num_updates, p_true)
    return dict(num_updates=num_updates, compile_s=round(compile_s, 2), **counts)


def main(argv: list[str] | None = None) -> int:
    spec = json.loads((argv or sys.argv[1:])[0])
    print(json.dumps(compile_and_count(spec)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
