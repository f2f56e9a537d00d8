"""Handed-back or final members played deterministically, from keys that
training never used: how ``compare`` scores each method's pick and
``seed_sets`` each seed's final policy."""

import functools
from typing import Any

import jax
import numpy as np

from ondevice_rl.evaluation import evaluate
from ondevice_rl.train.kit.registry import trainer_for

#: Folded into a search seed for its evaluation episodes (fresh keys).
EVAL_SALT = 0xE7A1


@functools.lru_cache(maxsize=8)
def _evaluator(config: Any, episodes: int):
    """Members' params ``[S, ...]`` and seeds ``[S]`` uint32 to mean returns
    ``[S]``, jitted: one per config and episode count, so that every call
    in a process (``seeds`` measured again, ``compare``'s methods) shares
    one compiled program."""
    trainer = trainer_for(config)

    def one(p, key):
        carry = trainer.initial_carry((episodes,))
        out = evaluate(
            trainer.policy,
            p,
            trainer.env,
            trainer.default_env_params,
            key,
            episodes,
            True,
            carry,
        )
        return out["return"].mean()

    def members(stacked, seeds):
        keys = jax.vmap(lambda s: jax.random.fold_in(jax.random.key(s), EVAL_SALT))(
            seeds
        )
        return jax.vmap(one)(stacked, keys)

    return jax.jit(members)


def evaluate_members(
    config: Any, params: list, picks: list[int | None], episodes: int, seeds
):
    """Deterministic evaluation returns ``[S]``: each pick's (an index into
    ``params``, members of one ``config``) mean return over ``episodes``
    episodes from keys that training never used, ``fold_in(key(seeds[i]),
    EVAL_SALT)`` (NaN for None)."""
    chosen = [p for p in picks if p is not None]
    if not chosen:
        return np.full(len(picks), np.nan)
    stacked = jax.tree.map(lambda *xs: np.stack(xs), *[params[p] for p in chosen])
    chosen_seeds = [seeds[i] for i, p in enumerate(picks) if p is not None]
    returns = _evaluator(config, episodes)(stacked, np.asarray(chosen_seeds, np.uint32))
    means = np.asarray(returns, np.float64)
    out, it = np.full(len(picks), np.nan), iter(means)
    for i, p in enumerate(picks):
        if p is not None:
            out[i] = next(it)
    return out
