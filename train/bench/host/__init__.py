"""``bench host``: "why is my GPU at 2%?" on any host simulator.

The same on-policy learner (PPO or A2C: network, loss, returns, optimiser
and hyperparameters identical; ``targets.py``) trained on each host env
through every backend, over the same env-step budget and seeds:

* ``gym-sync``, ``gym-async``, ``envpool-sync``, ``envpool-async``
  (``sources.py``): Python steps the envs; each step the observations go
  host→device and the actions device→host;
* ``envpool-xla`` (``envpool_xla.py``): EnvPool's C++ envs called from
  inside one jitted rollout;
* ``fused`` (``fused.py``): the JAX port and the learner in one program.

Per backend: env steps/s, updates/s, host↔device transfers per update, the
final return, and the device's busy share (``learner.py``).
"""

import importlib.util
from collections.abc import Callable, Sequence

import numpy as np

from ondevice_rl.train.bench.host.envpool_xla import train_envpool_xla
from ondevice_rl.train.bench.host.fused import train_fused
from ondevice_rl.train.bench.host.learner import train_on_host
from ondevice_rl.train.bench.host.sources import (
    MAX_ASYNC_PROCESSES,
    EnvPoolAsyncSource,
    envpool_sync_source,
    gym_source,
)
from ondevice_rl.train.bench.host.targets import HostTarget, host_target
from ondevice_rl.train.kit.registry import trainer_for

BACKENDS = (
    "gym-sync", "gym-async", "envpool-sync", "envpool-async", "envpool-xla", "fused",
)  # fmt: skip
ENVPOOL_BACKENDS = tuple(b for b in BACKENDS if b.startswith("envpool"))
#: What to install for the EnvPool backends.
ENVPOOL_EXTRA = "pip install 'ondevice-rl[host]' (EnvPool; Python 3.11 or 3.12)"
DEFAULT_ENVS = ("CartPole-v1",)
DEFAULT_NUM_ENVS = 16
DEFAULT_TIMESTEPS = 100_000
QUICK_TIMESTEPS = 8_192


def envpool_installed() -> bool:
    return importlib.util.find_spec("envpool") is not None


def envpool_tasks() -> set[str]:
    import envpool

    return set(envpool.list_all_envs())


def unavailable(backend: str, target: HostTarget, num_envs: int) -> str | None:
    """Why ``backend`` cannot run ``target`` (None: it can)."""
    if backend == "gym-async" and num_envs > MAX_ASYNC_PROCESSES:
        return f"one process per env: at most {MAX_ASYNC_PROCESSES} envs"
    if backend in ENVPOOL_BACKENDS:
        if not envpool_installed():
            return f"EnvPool is not installed: {ENVPOOL_EXTRA}"
        if target.spec not in envpool_tasks():
            return f"EnvPool has no task {target.spec}"
    if backend == "fused" and target.port is None:
        return "no JAX port (name one with --port HOST=PORT)"
    return None


def run_backend(backend: str, target: HostTarget, seed: int, async_batch: int) -> dict:
    """One seed of ``target`` through a host ``backend``."""
    trainer = trainer_for(target.config)
    discrete = not trainer.setup.continuous
    B = target.config.num_envs
    if backend == "envpool-xla":
        return train_envpool_xla(trainer, target.spec, seed, discrete)
    if backend == "gym-sync" or backend == "gym-async":
        source = gym_source(target.spec, B, seed, backend[4:], discrete)
    elif backend == "envpool-sync":
        source = envpool_sync_source(target.spec, B, seed, discrete)
    else:
        source = EnvPoolAsyncSource(target.spec, B, seed, async_batch, discrete)
    return train_on_host(trainer, source, seed)


def summary(backend: str, records: list[dict], seeds: Sequence[int]) -> dict:
    """One backend's row: means over seeds, each seed's final return."""
    finals = [r["final_return"] for r in records]

    def mean(name):
        values = [r[name] for r in records if r.get(name) is not None]
        return float(np.mean(values)) if values else None

    row = dict(records[0], backend=backend, seeds=list(seeds), final_returns=finals)
    for name in ("sps", "updates_per_s", "busy_share", "policy_lag", "run_s"):
        row[name] = mean(name)
    row["final_return"] = round(float(np.mean(finals)), 1)
    return row


def run_host_bench(
    specs: Sequence[str],
    backends: Sequence[str] = BACKENDS,
    *,
    algo: str = "ppo",
    num_envs: int = DEFAULT_NUM_ENVS,
    num_steps: int | None = None,
    timesteps: int = DEFAULT_TIMESTEPS,
    seeds: Sequence[int] = (0,),
    ports: dict | None = None,
    async_batch: int | None = None,
    log: Callable[[str], None] = print,
) -> dict:
    """Every backend on every host env of ``specs``; returns the record."""
    ports = ports or {}
    async_batch = async_batch or max(1, num_envs // 2)
    results = []
    for spec in specs:
        target = host_target(
            spec, ports.get(spec), algo, num_envs, timesteps, num_steps
        )
        rows = []
        for backend in backends:
            reason = unavailable(backend, target, num_envs)
            if reason is not None:
                log(f"host: {spec} {backend}: skipped ({reason})")
                rows.append(dict(backend=backend, skipped=reason))
                continue
            log(f"host: {spec} {backend}, {len(seeds)} seed(s) × {timesteps:,} steps")
            if backend == "fused":
                records = train_fused(target.config, list(seeds))
            else:
                records = [run_backend(backend, target, s, async_batch) for s in seeds]
            rows.append(summary(backend, records, seeds))
        results.append(env_result(target, rows))
    return dict(
        algo=algo, num_envs=num_envs, timesteps=timesteps, seeds=list(seeds),
        async_batch=async_batch, results=results,
    )  # fmt: skip


def env_result(target: HostTarget, rows: list[dict]) -> dict:
    """An env's rows, with the fused program's lead and the return check."""
    ran = [r for r in rows if "skipped" not in r]
    fused = next((r for r in ran if r["backend"] == "fused"), None)
    hosts = [r for r in ran if r["backend"] != "fused"]
    lead = None
    if fused is not None and hosts:
        best = max(hosts, key=lambda r: r["sps"])
        lead = dict(
            over=best["backend"], sps_ratio=round(fused["sps"] / best["sps"], 1)
        )
        low, high = min(fused["final_returns"]), max(fused["final_returns"])
        for r in hosts if len(fused["final_returns"]) > 1 else ():
            r["within_fused_range"] = all(low <= f <= high for f in r["final_returns"])
    note = None
    if target.port is not None and target.port != target.spec:
        note = (
            f"the port {target.port} is a different simulator from {target.spec} "
            "(its own physics and rewards): compare speeds, not returns"
        )
    return dict(
        env=target.spec, port=target.port, recipe=target.recipe,
        config=dict(num_envs=target.config.num_envs, num_steps=target.config.num_steps),
        rows=rows, fused_lead=lead, note=note,
    )  # fmt: skip
