"""``ondevice-rl bench --suite gpu``: everything one accelerator run should
tell us, in one ``bench.json``, ``bench.png`` and table.

* ``env``: random-policy env steps/s of our ports and MinAtar Breakout (and
  brax's if installed) at 1 … 2^16 parallel envs (``bench env``'s
  measurement);
* ``train``: every registered learner at 1, 16, 256 and 2048 seeds (one
  vmapped program each; its own default env and config, ``TIMESTEPS``
  env steps per seed), compile time, run time, SPS and final return; a
  learner with a reference script (``reference_<name>.py`` in the
  references directory, or the shipped SAC reference) runs it beside ours
  with the same seeds and steps;
* ``scaling``: the population scaling curve of each learner, SPS against
  seeds and the efficiency ``SPS(S) / (S · SPS(1))``;
* ``meta``: the device and its memory, the driver, CUDA and library
  versions, the matmul precision (ours via the configs; the references via
  ``JAX_DEFAULT_MATMUL_PRECISION``), the XLA flags and JAX's memory
  settings.

Before each population the memory rule (``train/services/memory.py``) is
asked whether it fits on the device as one program; one that does not, or
that fails (out of memory, a reference that crashes), is a row saying why,
and the suite goes on. ``bench.json`` is rewritten after every measurement,
so a run cut short keeps what it measured.
"""

import importlib.metadata
import os
import platform
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import jax

from ondevice_rl import envs
from ondevice_rl.train.bench import env_speed, report, train_speed
from ondevice_rl.train.kit.registry import algorithms
from ondevice_rl.train.services.memory import device_budget, estimate_member_bytes

SEEDS = (1, 16, 256, 2048)
BATCHES = (1, 16, 256, 1024, 4096, 16384, 65536)
ENVS = env_speed.OURS + ("gymnax/Breakout-MinAtar",)
#: Env steps per seed: on-policy learners as ``bench train``; the replay
#: learners, one gradient step per env step, fewer (as in the CPU tables).
TIMESTEPS = dict(ppo=500_000, a2c=500_000, pqn=500_000, dqn=200_000)
TIMESTEPS.update(sac=20_000, td3=20_000)
#: ``--quick``: the suite's shape at sizes a CPU runs in a few minutes (with
#: the CPU benches' quick seeds and batch sizes).
QUICK_TIMESTEPS = dict(ppo=16_384, a2c=16_384, pqn=16_384, dqn=2_048)
QUICK_TIMESTEPS.update(sac=2_048, td3=2_048)
#: References shipped with the package (the others come from a directory).
SHIPPED_REFERENCES = {"sac": Path(__file__).with_name("reference_sac.py")}
LIBRARIES = ("jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda12-pjrt")
LIBRARIES += ("jax-cuda13-plugin", "jax-cuda13-pjrt", "libtpu")
LIBRARIES += ("flax", "optax", "numpy", "gymnax", "brax")
MEMORY_SETTINGS = ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION")
MEMORY_SETTINGS += ("XLA_PYTHON_CLIENT_ALLOCATOR",)


def default_envs() -> tuple[str, ...]:
    """``ENVS`` and ``bench env``'s brax envs if brax is installed."""
    return ENVS + tuple(name for name in env_speed.BRAX if name in envs.names())


def references(directory: Path | None) -> dict[str, Path]:
    """Reference scripts by learner: the shipped ones, then
    ``reference_<name>.py`` files in ``directory``."""
    found = dict(SHIPPED_REFERENCES)
    if directory is not None:
        for name in algorithms():
            path = Path(directory) / f"reference_{name}.py"
            if path.is_file():
                found[name] = path
    return found


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _nvidia_smi() -> str | None:
    if shutil.which("nvidia-smi") is None:
        return None
    query = "--query-gpu=name,driver_version,memory.total,compute_cap"
    try:
        out = subprocess.run(
            ["nvidia-smi", query, "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def environment(precision: str) -> dict:
    """The device, driver, library versions and settings a report needs."""
    device = jax.devices()[0]
    stats = device.memory_stats() or {}
    return dict(
        platform=device.platform,
        device=device.device_kind,
        device_count=jax.device_count(),
        platform_version=getattr(device.client, "platform_version", None),
        nvidia_smi=_nvidia_smi(),
        memory_bytes_limit=stats.get("bytes_limit"),
        memory_settings={k: os.environ.get(k) for k in MEMORY_SETTINGS},
        python=platform.python_version(),
        libraries={name: _version(name) for name in LIBRARIES},
        matmul_precision=precision,
        xla_flags=os.environ.get("XLA_FLAGS", ""),
        jax_environment=jax.print_environment_info(return_string=True),
    )


def _failure(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


def bench_learner(
    name: str,
    seed_counts: tuple[int, ...],
    timesteps: int,
    reference: Path | None,
    fields: dict,
    log: Callable[[str], None],
    repeat: int = 1,
    measured: Callable[[list[dict]], None] = lambda rows: None,
) -> list[dict]:
    """One row per seed count: ours, then the reference's runs (a failing
    reference leaves ours standing), or why not; ``measured(rows)`` after
    each row."""
    config = train_speed.bench_config(timesteps, algo=name, fields=fields)
    per_member = estimate_member_bytes(config)
    budget = device_budget()
    rows = []
    for seeds in seed_counts:
        row = dict(algo=name, seeds=seeds, estimated_bytes=per_member * seeds)
        if per_member * seeds > budget:
            need, free = per_member * seeds / 2**30, budget / 2**30
            log(f"{name}: {seeds} seeds skipped, {need:.2f} GiB > {free:.2f} GiB")
            row["skipped"] = f"needs about {need:.2f} GiB, {free:.2f} GiB free"
        else:
            try:
                row.update(
                    train_speed.bench_seeds(
                        seeds, timesteps, None, repeat, log, name, None, fields
                    )
                )
            except Exception as e:  # out of memory, say: the next one may fit
                log(f"{name}: {seeds} seeds failed: {_failure(e)}")
                row["failed"] = _failure(e)
            if reference is not None and "sps" in row:
                row = _beside_reference(row, reference, seeds, timesteps, repeat, log)
        rows.append(row)
        measured(rows)
    return rows


def _beside_reference(row, reference, seeds, timesteps, repeat, log) -> dict:
    """``row`` with the reference's best of ``repeat`` runs, or why not."""
    try:
        refs = []
        for i in range(repeat):
            log(
                f"train: reference {reference.name}, {seeds} seed(s) ({i + 1}/{repeat})"
            )
            refs.append(train_speed.run_reference(reference, seeds, timesteps))
    except Exception as e:  # its failure is not ours
        log(f"reference {reference.name}: {seeds} seeds failed: {_failure(e)}")
        return dict(row, reference_failed=_failure(e))
    return train_speed.with_reference(row, refs)


def scaling(train: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """Per learner: ``seeds``, ``sps`` and the efficiency ``sps / (seeds ·
    sps at 1 seed)`` of every measured population."""
    curves = {}
    for name, rows in train.items():
        measured = [r for r in rows if r.get("sps")]
        one = next((r["sps"] for r in measured if r["seeds"] == 1), None)
        curves[name] = [
            dict(
                seeds=r["seeds"],
                sps=r["sps"],
                compile_s=r["compile_s"],
                efficiency=None if one is None else r["sps"] / (r["seeds"] * one),
            )
            for r in measured
        ]
    return curves


def run_gpu_suite(
    results: dict,
    out: Path,
    *,
    envs: tuple[str, ...] | None = None,
    batches: tuple[int, ...] = BATCHES,
    learners: tuple[str, ...] | None = None,
    seed_counts: tuple[int, ...] = SEEDS,
    timesteps: dict[str, int] | None = None,
    reference_dir: Path | None = None,
    precision: str = "highest",
    repeat: int = 1,
    log: Callable[[str], None] = print,
) -> dict:
    """Fills ``results`` (which holds ``meta``) with the suite's parts,
    writing ``out / "bench.json"`` after each measurement; returns it."""
    # The references' own matmuls at the same precision (their processes
    # read it from the environment; ours is in each config).
    os.environ["JAX_DEFAULT_MATMUL_PRECISION"] = precision
    results["meta"].update(suite="gpu", **environment(precision))
    path = out / "bench.json"
    start = time.perf_counter()
    envs = envs or default_envs()

    def env_measured(rows):
        report.write_json(dict(results, env=dict(results=rows)), path)

    results["env"] = env_speed.run_env_bench(
        envs, batches, False, False, log, measured=env_measured
    )
    report.write_json(results, path)
    found = references(reference_dir)
    results["references"] = {k: str(v) for k, v in found.items()}
    results["train"] = {}
    for name in learners or algorithms():
        steps = (timesteps or TIMESTEPS).get(name, train_speed.DEFAULT_TIMESTEPS)
        fields = dict(matmul_precision=precision)
        reference = found.get(name)

        def measured(rows, name=name):  # a run cut short keeps every row so far
            results["train"][name] = rows
            results["scaling"] = scaling(results["train"])
            report.write_json(results, path)

        bench_learner(
            name, seed_counts, steps, reference, fields, log, repeat, measured
        )
    results["meta"]["suite_seconds"] = round(time.perf_counter() - start, 1)
    report.write_json(results, path)
    return results
