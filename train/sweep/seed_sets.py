"""A recipe's result over disjoint sets of seeds, stated as rliable would
(``ondevice-rl seeds``, ``train/cli/seeds.py``).

``measure(config, seeds, sets)`` trains the config once per seed (one
population, a sweep: a seed's key is ``jax.random.key(seed)``, as ``train
--seed`` uses) and states, for each of ``sets`` equal sets of the seeds, in
order, and for all of them: the interquartile mean of the final return (the
mean ``episode_return`` of the last ``FINAL_WINDOW`` updates, as every run
reports it), its stratified-bootstrap 95% CI and the worst seed. A result
that holds on one set only shows here. ``table`` is the record as a
Markdown table. With ``checkpoints`` (a directory) the population trains in
rounds (nothing between them: the same members, the same keys),
checkpointed after each round; the same call again resumes
from the newest checkpoint, for runs longer than a sitting (with the same
CPU devices: on CPU the seeds are split over one device per core unless
told otherwise, padded to a multiple of the devices, so 4 seeds on 2 cores
take about as long as 3).
"""

from pathlib import Path
from typing import Any

import numpy as np

from ondevice_rl.metrics import FINAL_WINDOW
from ondevice_rl.train.sweep import stats
from ondevice_rl.train.sweep.engine import run_sweep
from ondevice_rl.train.sweep.member_eval import evaluate_members
from ondevice_rl.train.sweep.result import scores


def measure(
    config: Any,
    seeds: list[int],
    sets: int = 1,
    eval_episodes: int = 0,
    checkpoints: Path | None = None,
    curves: dict | None = None,
    **kwargs,
):
    """Trains ``config`` on ``seeds`` (split into ``sets`` equal sets, in
    order; a seed's key is ``jax.random.key(seed)``); returns the record
    (``kwargs`` go to ``run_sweep``: ``chunk_size``, ``cache``,
    ``progress``; with ``checkpoints``, a directory: ``round_updates``), or
    None if a checkpointed run was interrupted. With
    ``eval_episodes``, each seed's final policy also plays that many
    deterministic episodes from keys training never used
    (``member_eval.evaluate_members``): ``eval_returns``, their mean per seed.
    ``curves``, a dict, gets ``seed -> {metric: [num_updates]}``."""
    seeds = [int(s) for s in seeds]
    if sets < 1 or len(seeds) % sets:
        raise ValueError(f"{len(seeds)} seeds do not split into {sets} equal sets")
    trained = _trained(config, seeds, checkpoints, kwargs)
    if trained is None:
        return None
    metrics, params, seconds, resumed_from = trained
    if curves is not None:
        curves.update(metrics)
    returns = {s: m["episode_return"] for s, m in metrics.items()}
    final = {s: scores(curve)["final_return"] for s, curve in returns.items()}
    evaluated = {}
    if eval_episodes:
        finished = list(returns)
        means = evaluate_members(
            config, params, list(range(len(finished))), eval_episodes, finished
        )
        evaluated = {s: float(x) for s, x in zip(finished, means, strict=True)}
    groups = {f"seeds {label(s)}": s for s in np.split(np.asarray(seeds), sets)}
    groups[f"all {len(seeds)} seeds"] = np.asarray(seeds)
    rows = []
    for name, members in groups.items():
        row = {"seeds": name, **_summary(final, members, "final_return")}
        row["final_returns"] = row.pop("values")
        if evaluated:
            summary = _summary(evaluated, members, "eval_return")
            row["eval_returns"] = summary.pop("values")
            row["eval"] = summary
        rows.append(row)
    return {
        "env": config.env,
        "total_timesteps": config.total_timesteps,
        "metric": f"final return (mean episode_return of the last {FINAL_WINDOW} "
        "updates)",
        "sets": rows,
        "eval_episodes": eval_episodes,
        "seconds": seconds,  # of this sitting: after round resumed_from
        "resumed_from": resumed_from,
    }


def label(seeds) -> str:
    """``100-107`` for consecutive seeds, else ``1,5,9``."""
    seeds = [int(s) for s in seeds]
    if seeds == list(range(seeds[0], seeds[0] + len(seeds))) and len(seeds) > 1:
        return f"{seeds[0]}-{seeds[-1]}"
    return ",".join(map(str, seeds))


def _trained(config, seeds, checkpoints, kwargs):
    """``({seed: {metric: [num_updates]}}, [params per seed], seconds,
    resumed from round)`` of the finished seeds: one population in one
    round or, with ``checkpoints``, in checkpointed rounds resumed from the
    newest (None if that was interrupted)."""
    if checkpoints is not None and kwargs.get("progress"):
        kwargs = {**kwargs, "progress": "seed sets"}  # not "random search"
    result = run_sweep(
        config, seeds, checkpoints=checkpoints, resume=checkpoints is not None, **kwargs
    )
    if checkpoints is not None and result.interrupted:
        return None
    done = result.finished
    metrics = {m.seed: result.metrics[m.index] for m in done}
    resumed_from = result.lineage.resumed_from if result.lineage else 0
    return metrics, [result.params[m.index] for m in done], result.seconds, resumed_from


def _summary(by_seed: dict, members: np.ndarray, name: str) -> dict:
    """IQM, its stratified-bootstrap 95% CI and the worst seed of
    ``by_seed[s]`` over ``members`` (a missing seed counts as NaN)."""
    values = np.asarray([by_seed.get(int(s), np.nan) for s in members])
    iqm, low, high = stats.interval_estimates({name: values})[name]
    worst = int(members[np.nanargmin(values)])
    return {
        "n": int(np.isfinite(values).sum()),
        "iqm": iqm,
        "ci": [low, high],
        "worst": {"seed": worst, name: by_seed[worst]},
        "values": values.tolist(),
    }


def number(x: float) -> str:
    """A return as stated: 3 decimals below 10 in magnitude, else 1."""
    return f"{x:.3f}" if abs(x) < 10 else f"{x:.1f}"


def stated(summary: dict, name: str) -> tuple[str, str]:
    """``("IQM [low, high]", "value (seed s)")`` of a ``_summary``."""
    low, high = summary["ci"]
    worst = summary["worst"]
    return (
        f"{number(summary['iqm'])} [{number(low)}, {number(high)}]",
        f"{number(worst[name])} (seed {worst['seed']})",
    )


def table(record: dict) -> str:
    evaluated = record.get("eval_episodes", 0)
    lines = [
        "| seeds | n | IQM final return [95% CI] | worst seed |"
        + (
            f" IQM deterministic evaluation ({evaluated} episodes) [95% CI] | "
            "worst seed |"
            if evaluated
            else ""
        ),
        "|---|---|---|---|" + ("---|---|" if evaluated else ""),
    ]
    for r in record["sets"]:
        line = f"| {r['seeds']} | {r['n']} | {' | '.join(stated(r, 'final_return'))} |"
        if evaluated:
            line += f" {' | '.join(stated(r['eval'], 'eval_return'))} |"
        lines.append(line)
    return "\n".join(lines) + "\n"
