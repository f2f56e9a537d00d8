"""Files and terminal output of a sweep (``ondevice-rl sweep``).

Written into the output directory, by every sweep:

* ``sweep.csv``: one row per finished member (``SweepResult.rows``);
* ``curves.npz``: every member's metrics ``[updates]`` and env steps;
* ``profile.png``: performance profiles (``figures.py``);
* ``summary.json``: learner, env, members, non-finite members, programs
  compiled, wall time, devices; numbers stay numbers.

A sweep in one round adds ``ranking.csv`` (one row per setting, best first,
with the IQM of ``last10pct_return`` over its seeds and its stratified
bootstrap 95% CI, ``stats.py``) and ``curves.png`` (the best settings'
curves); its summary holds the fixed (single-valued) changes, the best
setting and member and the groups. A search adds ``lineage.csv`` (one row
per round and member: env steps, trial, event, the member copied from,
score, finite, rung and hyperparameters after the round), ``lineage.png``
and ``members/params-*.npz`` (every member's final parameters); its summary
holds the strategy, each group's handed-back member, their IQM and 95% CI
over seeds, the best member and the share of time spent between rounds.
"""

import csv
import dataclasses
from pathlib import Path
from typing import Any

import jax
import numpy as np

from ondevice_rl.train.kit.registry import algorithm_of
from ondevice_rl.train.run.artifacts import write_json
from ondevice_rl.train.services.writes import write_each
from ondevice_rl.train.sweep import figures, stats, store
from ondevice_rl.train.sweep.lineage import RECORD_FIELDS
from ondevice_rl.train.sweep.result import (
    SweepResult,
    formatted,
    scores,
)
from ondevice_rl.train.sweep.space import shortest

#: summary.json's names for an IQM and its 95% CI.
INTERVAL_KEYS = ("last10pct_iqm", "last10pct_ci_low", "last10pct_ci_high")


def json_value(value: Any) -> Any:
    """A config or search value as JSON keeps it: numbers as numbers,
    tuples (``hidden``) as lists."""
    if isinstance(value, tuple | list):
        return [json_value(v) for v in value]
    if hasattr(value, "item"):  # a NumPy scalar
        return value.item()
    return value


def write_rows(rows: list[dict], path: Path, columns: list | None = None) -> Path:
    """A CSV of ``rows`` (values as the tables write them)."""
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns or list(rows[0]))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: formatted(v) for k, v in row.items()})
    return path


def write_sweep_csv(result: SweepResult, path: Path) -> Path:
    """``sweep.csv``: one row per finished member (see ``SweepResult.rows``)."""
    empty = ["member", "setting", "seed"] if result.lineage is None else ["member"]
    return write_rows(result.rows(), path, None if result.finished else empty)


def setting_intervals(result: SweepResult) -> dict[int, tuple[float, float, float]]:
    """Per ranked setting: IQM and 95% CI of ``last10pct_return`` over its
    finite seeds."""
    nonfinite = result.nonfinite
    by_setting: dict[int, list[float]] = {}
    for m in result.finished:
        if m.index not in nonfinite:
            value = scores(result.returns(m))["last10pct_return"]
            by_setting.setdefault(m.setting, []).append(value)
    return stats.interval_estimates(by_setting)


def write_ranking(result: SweepResult, path: Path) -> Path:
    """``ranking.csv``: rank, setting, swept values, seeds and scores."""
    swept, intervals = list(result.plan.swept), setting_intervals(result)
    rows = []
    for rank, s in enumerate(result.ranking(), 1):
        row = {"rank": rank, "setting": s.setting, **{k: s.values[k] for k in swept}}
        row.update(seeds=len(s.seeds), diverged=s.diverged)
        row.update(last10pct_mean=s.last10pct_mean, last10pct_std=s.last10pct_std)
        row.update(zip(INTERVAL_KEYS, intervals[s.setting], strict=True))
        row.update(final_mean=s.final_mean, auc_mean=s.auc_mean)
        rows.append(row)
    columns = ["rank", "setting", *swept, "seeds", "diverged", "last10pct_mean"]
    columns += ["last10pct_std", *INTERVAL_KEYS, "final_mean", "auc_mean"]
    return write_rows(rows, path, columns)


def write_lineage(result: SweepResult, path: Path) -> Path:
    """``lineage.csv`` (see the module docstring)."""
    lineage, rows = result.lineage, []
    steps, events = lineage.round_env_steps(), lineage.events()
    hp = {k: lineage[f"hp/{k}"] for k in result.config.HYPERPARAMS._fields}
    fields = {k: lineage[k] for k in RECORD_FIELDS}
    for r in range(lineage.done):
        for i in range(lineage.members):
            row = {"round": r + 1, "env_steps": int(steps[r]), "member": i}
            row["group"] = int(lineage.group[i])
            row["trial"] = int(fields["trial"][r, i])
            row["event"] = events[r, i]
            parent = int(fields["parent"][r, i])
            row["parent"] = "" if parent < 0 else parent
            row["score"] = float(fields["score"][r, i])
            row["finite"] = bool(fields["finite"][r, i])
            row["rung"] = int(fields["rung"][r, i])
            row.update({k: float(v[r, i]) for k, v in hp.items()})
            rows.append(row)
    return write_rows(rows, path, None if rows else ["member"])


def write_curves(result: SweepResult, path: Path) -> Path:
    """``curves.npz``: ``member_<i>_<metric>`` arrays ``[updates]`` for every
    finished member, and ``member_<i>_env_steps``."""
    arrays = {}
    for m in result.finished:
        for name, values in result.metrics[m.index].items():
            arrays[f"member_{m.index}_{name}"] = values
        steps = np.arange(1, len(result.returns(m)) + 1)
        arrays[f"member_{m.index}_env_steps"] = steps * m.config.steps_per_update
    np.savez_compressed(path, **arrays)
    return Path(path)


def handed_back(result: SweepResult) -> list[dict]:
    """Per group: seed, member, score and hyperparameters handed back."""
    lineage, out = result.lineage, []
    final = lineage.final_scores()
    for g, member in lineage.handed_back().items():
        entry = {"group": g, "seed": result.plan.seeds[g], "member": member}
        if member is not None:
            entry["score"] = float(final[member])
            entry["hp"] = {k: shortest(v[member]) for k, v in lineage.hp.items()}
        out.append(entry)
    return out


def picks_interval(picks: list[dict]) -> tuple[float, float, float]:
    values = np.asarray([p.get("score", np.nan) for p in picks], np.float64)
    return stats.interval_estimates({"x": values})["x"]


def summary(result: SweepResult) -> dict:
    """What ``summary.json`` holds (see the module docstring)."""
    plan, lineage = result.plan, result.lineage
    out = {"algo": algorithm_of(plan.base).name, "env": plan.base.env}
    if lineage is None:
        return out | _sweep_summary(result)
    picks = handed_back(result)
    iqm, low, high = picks_interval(picks)
    strategy = dataclasses.asdict(lineage.strategy) if lineage.strategy else {}
    timing = {
        "rounds_s": float(sum(lineage.round_seconds)),
        "steps_s": float(sum(lineage.step_seconds)),
        "step_share": lineage.steps_share,
    }
    return out | {
        "strategy": dict(name=lineage.name, **strategy),
        "members": len(plan.members),
        "seeds": list(plan.seeds),
        "searched": list(result.searched),
        "rounds": len(lineage.lengths),
        "rounds_done": lineage.done,
        "round_updates": lineage.lengths[0],
        "score_episodes": lineage.score_episodes,
        "env_steps": lineage.env_steps,
        "handed_back": picks,
        "handed_back_iqm": iqm,
        "handed_back_ci_low": low,
        "handed_back_ci_high": high,
        "best_member": result.best_member,
        "nonfinite": [
            {"round": r, "member": m, "trial": t} for r, m, t in lineage.nonfinite()
        ],
        "timing": timing,
        "programs_compiled": result.programs_compiled,
        "seconds": round(result.seconds, 3),
        "interrupted": result.interrupted,
        "resumed_from": lineage.resumed_from,
        "devices": jax.device_count(),
        "processes": jax.process_count(),
    }


def _sweep_summary(result: SweepResult) -> dict:
    best, plan = result.best, result.plan
    interval = setting_intervals(result).get(best.setting) if best else None
    if best is not None:
        best = {
            "setting": best.setting,
            "values": {k: json_value(v) for k, v in best.values.items()},
            "seeds": list(best.seeds),
            "last10pct_mean": best.last10pct_mean,
            "last10pct_std": best.last10pct_std,
            **dict(zip(INTERVAL_KEYS, interval or (), strict=False)),
            "final_mean": best.final_mean,
            "auc_mean": best.auc_mean,
        }
    groups = []
    for g in result.groups:
        config = {k: json_value(v) for k, v in g.config.to_dict().items()}
        fields = g._asdict()
        del fields["index"], fields["config"]
        groups.append({"config": config, **fields})
    return {
        "fixed": {k: json_value(v) for k, v in plan.fixed.items()},
        "members": len(plan.members),
        "finished": len(result.finished),
        "interrupted": result.interrupted,
        "programs_compiled": result.programs_compiled,
        "seconds": round(result.seconds, 3),
        "devices": jax.device_count(),
        "processes": jax.process_count(),
        "best": best,
        "best_member": result.best_member,
        "nonfinite": {str(i): why for i, why in result.nonfinite.items()},
        "groups": groups,
    }


def write_outputs(result: SweepResult, out: Path, top: int = 10) -> list[Path]:
    """Writes every file listed in the module docstring into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    writers = {
        "sweep.csv": lambda path: write_sweep_csv(result, path),
        "ranking.csv": lambda path: write_ranking(result, path),
        "curves.npz": lambda path: write_curves(result, path),
        "curves.png": lambda path: figures.plot_curves(result, path, top=top),
        "lineage.csv": lambda path: write_lineage(result, path),
        "lineage.png": lambda path: figures.plot_lineage(result, path),
        "profile.png": lambda path: figures.plot_profile(result, path, top=top),
        store.MEMBERS_DIR: lambda path: store.save_params(
            out, result, range(len(result.plan.members))
        ),
        "summary.json": lambda path: write_json(path, summary(result)),
    }
    skipped = ("lineage.csv", "lineage.png", store.MEMBERS_DIR)
    if result.lineage is not None:
        skipped = ("ranking.csv", "curves.png")
    return write_each(out, {k: w for k, w in writers.items() if k not in skipped})
