"""``bench host``: the "my GPU sits at 2%" experiment.

The same on-policy learner (PPO by default, with its config's defaults:
CartPole-v1, 4 envs × 128 steps, 4 epochs × 4 minibatches; or A2C) run two
ways:

* host loop (``host_loop.py``): gymnasium steps the envs on the host; every
  env step moves observations host→device and actions device→host;
* fused (``make_train``): one compiled program; its inputs go in once and its
  metrics come out once. That nothing reaches the host in between is checked
  by reading the lowered and compiled program (``transfers.host_ops``).

SPS is per env step for both, so it compares across different run lengths
(the host loop runs fewer steps by default: it is slow).
"""

from collections.abc import Callable

from ondevice_rl.train.bench.host_loop import run_host_loop
from ondevice_rl.train.bench.train_speed import measure_ours
from ondevice_rl.train.kit.registry import DEFAULT, get_algorithm

DEFAULT_HOST_TIMESTEPS = 100_000
QUICK_HOST_TIMESTEPS = 8_192


def fused_summary(record: dict) -> dict:
    """Adds the per-step transfer figures to a ``measure_ours`` record."""
    in_program = 0 if not record["host_ops"] else None  # None: not countable
    total = record["transfers"]["h2d"] + record["transfers"]["d2h"]
    return dict(
        record,
        transfers_per_step=in_program,
        transfers_per_env_step=in_program,
        one_off_transfers=total,
        one_off_per_env_step=total / record["timesteps"],
    )


def run_host_bench(
    host_timesteps: int,
    fused_timesteps: int,
    fused_record: dict | None = None,
    log: Callable[[str], None] = print,
    algo: str = DEFAULT,
) -> dict:
    """Host loop vs fused loop at 1 seed; ``fused_record`` reuses a
    ``measure_ours(1, fused_timesteps)`` result taken in the same invocation."""
    log(f"host: classic host loop ({algo}), {host_timesteps:,} steps")
    config = get_algorithm(algo).config(total_timesteps=int(host_timesteps))
    host = run_host_loop(config)
    if fused_record is None:
        log(f"host: fused loop, {fused_timesteps:,} steps")
        fused_record = measure_ours(1, fused_timesteps, algo=algo)
    fused = fused_summary(fused_record)
    note = (
        f"host loop ran {host['timesteps']:,} env steps, fused "
        f"{fused['timesteps']:,}; SPS is per env step, so it compares"
    )
    return dict(
        host_loop=host,
        fused=fused,
        speedup=round(fused["sps"] / host["sps"], 2),
        note=note,
    )
