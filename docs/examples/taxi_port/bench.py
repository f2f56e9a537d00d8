"""The port's speed beside gymnasium's vector env, random actions.

Ours: ``taxi_port.env:make_taxi`` as ``EpisodeStats(AutoReset(env))``, B
environments vmapped in one jitted ``lax.scan`` (``ondevice-rl bench env``'s
measurement: best of 3 after a warm-up, compile timed apart). gymnasium's:
``gymnasium.make_vec("Taxi-v4", num_envs=B, vectorization_mode="sync")``
stepped on the host for ``--budget`` seconds per batch size. Prints a
Markdown table (and ``--json`` writes the rows)::

    PYTHONPATH=docs/examples/taxi_port python docs/examples/taxi_port/bench.py
"""

import argparse
import json
import platform

import jax

import ondevice_rl  # noqa: F401  (XLA flags first)
from ondevice_rl.train.bench.env_speed import (
    bench_gymnasium,
    bench_ours,
    num_steps_for,
)

ENTRY = "taxi_port.env:make_taxi"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,64,1024,4096,16384")
    parser.add_argument("--budget", type=float, default=2.0, help="s per gymnasium row")
    parser.add_argument("--quick", action="store_true", help="shorter scans")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    rows = []
    for batch in (int(b) for b in args.batches.split(",")):
        steps = num_steps_for(batch, args.quick)
        ours = bench_ours(ENTRY, batch, steps)
        theirs = bench_gymnasium("Taxi-v4", batch, args.budget)
        rows.append(dict(batch=batch, ours=ours, gymnasium=theirs))
    device = jax.devices()[0]
    print(f"Taxi-v4, random actions; {device.device_kind} ({platform.machine()})\n")
    print("| envs | port (jit, vmap) steps/s | gymnasium sync vector env | ratio |")
    print("|---:|---:|---:|---:|")
    for row in rows:
        ours, theirs = row["ours"]["sps"], row["gymnasium"]["sps"]
        ratio = ours / theirs
        print(f"| {row['batch']} | {ours:,.0f} | {theirs:,.0f} | {ratio:.1f}× |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=device.device_kind, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
