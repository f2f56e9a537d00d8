"""``bench train``: training steps per second and compile time, ours vs a
reference.

Our program is ``jax.jit(jax.vmap(make_train(config), in_axes=(0, None)))``
for the chosen algorithm with its config's defaults (PPO: 4 envs × 128
steps, 4 epochs × 4 minibatches) over ``S`` seeds (hyperparameters shared),
with the seeds split over
``gcd(S, number of devices)`` devices (on CPU, one device per core: see
``ondevice_rl.use_cpu_cores``; the record's ``devices``). Compile time is
``jit(f).lower(keys, hp).compile()`` (tracing included, as the reference
measures it), with the library's compile options (the record's
``compile_options``: on CPU the concurrency-optimised scheduler for eight
or more seeds on a device with two or more cores, ``ondevice_rl.cpu.flags``); run
time is one execution, blocked on. ``sps = S * U * N / run_s`` with ``N =
config.steps_per_update`` env steps per update and ``U = timesteps // N``
updates.

With ``reference``, the reference script runs as a subprocess with the same
``--seeds``/``--timesteps`` and environment (``XLA_FLAGS`` included: the
library's scheduler flag, which a reference's batched QR needs), right
after ours, ``repeat`` times interleaved (ours, ref, ours, ref, ...); the best
of each side is kept (highest SPS, lowest compile time) beside every repeat's
SPS, and the ratio is given both ways: best over best and median over median
(``ratio.sps_median``).
"""

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np

from ondevice_rl.cpu.flags import scheduler_options
from ondevice_rl.devices.sharding import (
    POP_AXIS,
    leading_axis_sharding,
    make_mesh,
    replicated_sharding,
)
from ondevice_rl.metrics import final_return
from ondevice_rl.train.bench.flops import matmul_peak, traced_flops
from ondevice_rl.train.bench.transfers import TransferCounter, host_ops
from ondevice_rl.train.kit.registry import DEFAULT, algorithm_of, get_algorithm
from ondevice_rl.train.recipes import load_recipe

DEFAULT_SEEDS = (1, 16, 64)
QUICK_SEEDS = (1, 4)
DEFAULT_TIMESTEPS = 500_000
QUICK_TIMESTEPS = 16_384
REQUIRED = ("sps", "compile_s", "run_s", "final_return", "seeds", "timesteps")


class BenchError(Exception):
    """Bad input or a failed reference run: reported as one line."""


def bench_config(
    timesteps: int,
    env: str | None = None,
    algo: str = DEFAULT,
    recipe: str | None = None,
    fields: dict | None = None,
) -> Any:
    """The config timed: ``algo``'s defaults on ``env`` (None: its default
    env, CartPole-v1 for the discrete learners, Pendulum-v1 for SAC and
    TD3), or a recipe's settings; ``total_timesteps`` per seed either way,
    and ``fields`` (say ``matmul_precision``) over it."""
    fields = dict(fields or {}, total_timesteps=int(timesteps))
    if recipe is not None:
        return load_recipe(recipe).replace(**fields)
    config = get_algorithm(algo).config(**fields)
    return config if env is None else config.replace(env=env)


def measure_ours(
    seeds: int,
    timesteps: int,
    env: str | None = None,
    algo: str = DEFAULT,
    recipe: str | None = None,
    fields: dict | None = None,
) -> dict:
    """Compiles and runs our fused ``algo`` once; returns the JSON record.

    The record also has ``transfers`` (by construction: one put of keys and
    hyperparameters, one get of the returns), ``host_ops`` (host-talking
    operations found in the lowered and compiled program; expected: none)
    and ``matmul_flops``, the program's matmul FLOPs (``flops.py``: counted
    from the trace that is compiled, never run).
    """
    config = bench_config(timesteps, env, algo, recipe, fields)
    algorithm = algorithm_of(config)
    train = jax.vmap(algorithm.make_train(config), in_axes=(0, None))
    counter = TransferCounter()
    devices = jax.devices()[: math.gcd(seeds, jax.device_count())]
    mesh = make_mesh(POP_AXIS, devices)
    keys_np = np.asarray(jax.random.split(jax.random.PRNGKey(0), seeds))
    keys, hp = counter.put(
        (keys_np, jax.device_get(config.hyperparams)),
        (leading_axis_sharding(mesh), replicated_sharding(mesh)),
    )
    t0 = time.perf_counter()
    traced = jax.jit(train).trace(keys, hp)
    lowered = traced.lower()
    options = scheduler_options(lowered, seeds // len(devices), len(devices))
    compiled = lowered.compile(compiler_options=options or None)
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = jax.block_until_ready(compiled(keys, hp))
    run_s = time.perf_counter() - t0
    returns = counter.get(out.metrics["episode_return"])  # [S, U]
    steps = seeds * config.num_updates * config.steps_per_update
    return dict(
        algo=algorithm.name,
        matmul_precision=config.matmul_precision,
        seeds=seeds,
        num_envs=config.num_envs,
        devices=len(devices),
        timesteps=steps,
        compile_s=round(compile_s, 3),
        run_s=round(run_s, 3),
        sps=round(steps / run_s),
        final_return=round(float(np.mean(final_return(returns))), 1),
        transfers=counter.as_dict(),
        host_ops=host_ops(lowered, compiled),
        compile_options=options,
        matmul_flops=traced_flops(traced).flops,
    )


def run_reference(path: Path, seeds: int, timesteps: int) -> dict:
    """Runs the reference script; returns its JSON line as a dict."""
    cmd = [sys.executable, str(path), "--seeds", str(seeds)]
    cmd += ["--timesteps", str(int(timesteps))]
    # os.environ already carries the XLA_FLAGS that importing ondevice_rl set.
    env = dict(os.environ)
    # On a GPU this process already holds JAX's preallocated pool (75% of the
    # device): a second process preallocating its own would run out.
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip().startswith("{")]
    if proc.returncode or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise BenchError(f"reference {path} failed (exit {proc.returncode}): {tail}")
    record = json.loads(lines[-1])
    missing = [k for k in REQUIRED if k not in record]
    if missing:
        raise BenchError(f"reference {path} printed no {', '.join(missing)}")
    return record


def _best(runs: list[dict]) -> dict:
    best = dict(max(runs, key=lambda r: r["sps"]))
    best["compile_s"] = min(r["compile_s"] for r in runs)
    return best


def bench_seeds(
    seeds: int,
    timesteps: int,
    reference: Path | None,
    repeat: int,
    log: Callable[[str], None] = print,
    algo: str = DEFAULT,
    recipe: str | None = None,
    fields: dict | None = None,
) -> dict:
    """Ours (and the reference) at one seed count; best of ``repeat``."""
    ours, refs = [], []
    for i in range(repeat):
        log(
            f"train: ours ({algo}), {seeds} seed(s), {timesteps:,} steps each "
            f"({i + 1}/{repeat})"
        )
        ours.append(measure_ours(seeds, timesteps, None, algo, recipe, fields))
        if reference is not None:
            log(f"train: reference, {seeds} seed(s) ({i + 1}/{repeat})")
            refs.append(run_reference(reference, seeds, timesteps))
    for record in ours:  # the program's matmul FLOPs over each run's time
        record["matmul_gflops"] = round(
            record["matmul_flops"] / record["run_s"] / 1e9, 2
        )
    result = _best(ours)
    result["repeats"] = [r["sps"] for r in ours]
    return with_reference(result, refs) if refs else result


def with_reference(result: dict, refs: list[dict]) -> dict:
    """``result`` with the best of the reference's ``refs`` and the ratios."""
    ref = _best(refs)
    ref["repeats"] = [r["sps"] for r in refs]
    median = float(np.median(result["repeats"]) / np.median(ref["repeats"]))
    ratio = dict(
        sps=round(result["sps"] / ref["sps"], 3),
        sps_median=round(median, 3),
        compile=round(result["compile_s"] / ref["compile_s"], 3),
    )
    return dict(result, reference=ref, ratio=ratio)


def run_train_bench(
    seed_counts: tuple[int, ...],
    timesteps: int,
    reference: Path | None,
    repeat: int,
    log: Callable[[str], None] = print,
    algo: str = DEFAULT,
    recipe: str | None = None,
    fields: dict | None = None,
) -> dict:
    """All seed counts: the last one's fields at top level plus ``results``
    (``fields``: config fields over the timed config's), and one device's
    measured float32 matmul rate, ``matmul_peak_gflops``, with each result's
    ``peak_fraction`` (its ``matmul_gflops`` over that rate times the
    devices it ran on)."""
    if reference is not None and not Path(reference).is_file():
        raise BenchError(f"--reference: no such file: {reference}")
    try:
        config = bench_config(timesteps, algo=algo, recipe=recipe, fields=fields)
    except (ValueError, FileNotFoundError) as e:
        raise BenchError(f"--timesteps: {e}") from None
    results = [
        bench_seeds(s, timesteps, reference, repeat, log, algo, recipe, fields)
        for s in seed_counts
    ]
    log("train: one device's float32 matmul peak")
    peak = matmul_peak() / 1e9
    for result in results:  # over the peak of the devices the run used
        rate = result["matmul_gflops"] / (peak * result["devices"])
        result["peak_fraction"] = round(rate, 3)
    summary = {k: v for k, v in results[-1].items() if k != "repeats"}
    return dict(
        summary,
        results=results,
        repeat=repeat,
        algo=algorithm_of(config).name,
        env=config.env,
        recipe=recipe,
        matmul_peak_gflops=round(peak, 1),
    )
