"""``fused``: the same learner as one compiled program (``make_train``).

Its inputs go in once and its metrics come out once; that nothing reaches
the host in between is checked by reading the lowered and compiled program
(``transfers.host_ops``). Its busy share is the program's own run time (a
second pass) over the timed pass's wall time, which adds only the call and
the copy of the metrics: about 1 by construction.
"""

import time
from typing import Any

import jax
import numpy as np

from ondevice_rl.metrics import final_return
from ondevice_rl.train.bench.transfers import TransferCounter, host_ops
from ondevice_rl.train.kit.registry import algorithm_of


def train_fused(config: Any, seeds: list[int]) -> list[dict]:
    """One record per seed (key ``jax.random.PRNGKey(seed)``), compiled once."""
    train = jax.jit(algorithm_of(config).make_train(config))
    hp = jax.device_get(config.hyperparams)
    key = jax.random.PRNGKey(seeds[0])
    t0 = time.perf_counter()
    lowered = train.lower(key, hp)
    compiled = lowered.compile()
    compile_s = time.perf_counter() - t0
    ops = host_ops(lowered, compiled)
    jax.block_until_ready(compiled(key, hp))  # first-run costs out of the timing
    records = []
    for seed in seeds:
        counter = TransferCounter()
        t0 = time.perf_counter()
        inputs = counter.put((np.asarray(jax.random.PRNGKey(seed)), hp))
        out = compiled(*inputs)
        returns = counter.get(out.metrics["episode_return"])
        wall = time.perf_counter() - t0
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(*inputs))
        program_s = time.perf_counter() - t0
        updates = config.num_updates
        records.append(dict(
            timesteps=updates * config.steps_per_update,
            updates=updates,
            compile_s=round(compile_s, 3),
            run_s=round(wall, 3),
            sps=round(updates * config.steps_per_update / wall),
            updates_per_s=round(updates / wall, 2),
            final_return=round(final_return(np.asarray(returns)), 1),
            transfers=counter.as_dict(),
            transfers_per_update=0 if not ops else None,  # None: not countable
            one_off_transfers=counter.total,
            host_ops=ops,
            busy_share=round(min(1.0, program_s / wall), 4),
            policy_lag=0.0,
        ))  # fmt: skip
    return records
