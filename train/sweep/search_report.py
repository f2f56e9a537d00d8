"""Files and terminal output of a search (``ondevice-rl sweep --strategy``).

Written into the output directory, beside the checkpoints:

* ``sweep.csv``: one row per member (slot): final hyperparameters, scores
  of its slot's curve, its search ``score``, ``trial``, ``rung``, whether it
  is ``handed_back`` (``SearchResult.rows``);
* ``curves.npz``: every slot's metrics ``[updates]`` and env steps;
* ``lineage.csv``: one row per round and member: env steps, trial, event
  (``kept``, ``exploited``, ``refilled``), the member copied from, score,
  finite, rung and hyperparameters after the round;
* ``lineage.png``: the first group's hyperparameter schedules and scores
  over env steps, copies marked;
* ``profile.png``: the performance profile of the handed-back members'
  scores over search seeds;
* ``summary.json``: the strategy, each group's handed-back member, their
  IQM and 95% CI over seeds, the best member, members that went
  non-finite, the share of time spent between rounds;
* ``members/params-*.npz``: every member's final parameters (``eval``,
  ``render``, ``load_policy`` with a member).
"""

import csv
import dataclasses
from pathlib import Path

import jax
import numpy as np

from ondevice_rl.train.kit.registry import algorithm_of
from ondevice_rl.train.run.artifacts import write_json
from ondevice_rl.train.services.writes import write_each, write_whole
from ondevice_rl.train.sweep import member_files, stats
from ondevice_rl.train.sweep.results import _fmt
from ondevice_rl.train.sweep.search_result import (
    RECORD_FIELDS,
    SearchResult,
    shortest,
)
from ondevice_rl.train.sweep.store import MEMBERS_DIR


def write_rows(rows: list[dict], path: Path) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["member"])
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _fmt(v) for k, v in row.items()})
    return path


def write_lineage(result: SearchResult, path: Path) -> Path:
    """``lineage.csv`` (see the module docstring)."""
    rows = []
    steps, events = result.round_env_steps(), result.events()
    hp = {k: result.lineage(f"hp/{k}") for k in result.hp_fields}
    fields = {k: result.lineage(k) for k in RECORD_FIELDS}
    for r in range(result.done):
        for i in range(result.members):
            row = {"round": r + 1, "env_steps": int(steps[r]), "member": i}
            row["group"] = int(result.group[i])
            row["trial"] = int(fields["trial"][r, i])
            row["event"] = events[r, i]
            parent = int(fields["parent"][r, i])
            row["parent"] = "" if parent < 0 else parent
            row["score"] = float(fields["score"][r, i])
            row["finite"] = bool(fields["finite"][r, i])
            row["rung"] = int(fields["rung"][r, i])
            row.update({k: float(v[r, i]) for k, v in hp.items()})
            rows.append(row)
    return write_rows(rows, path)


def plot_lineage(result: SearchResult, path: Path, group: int = 0) -> Path:
    """``lineage.png``: one group's scores and searched hyperparameters
    over env steps, one line per member, copies and refills marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result.searched) or list(result.hp_fields[:1])
    fig, axes = plt.subplots(
        1 + len(names), 1, figsize=(8, 2.6 * (1 + len(names))), dpi=100, sharex=True
    )
    steps = result.round_env_steps()
    members = [i for i in range(result.members) if result.group[i] == group]
    events = result.lineage("event") if result.done else None
    series = [("score", result.lineage("score") if result.done else None)]
    series += [(k, result.lineage(f"hp/{k}") if result.done else None) for k in names]
    for ax, (name, values) in zip(np.atleast_1d(axes), series, strict=True):
        for i in members if values is not None else []:
            (line,) = ax.step(steps, values[:, i], where="post", lw=1.2)
            moved = events[:, i] != 0
            ax.plot(steps[moved], values[moved, i], "o", ms=3, color=line.get_color())
        ax.set_ylabel(name)
        positive = values is not None and np.all(values > 0)
        if name != "score" and positive and values.max() > 10 * values.min():
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[-1].set_xlabel("environment steps (per member)")
    np.atleast_1d(axes)[0].set_title(
        f"{result.plan.base.env} {result.strategy.name}: seed "
        f"{result.plan.seeds[group]}, {len(members)} members (dots: copied or "
        "refilled after the round)"
    )
    fig.tight_layout()
    write_whole(path, fig.savefig)
    plt.close(fig)
    return path


def handed_back(result: SearchResult) -> list[dict]:
    """Per group: seed, member, score and hyperparameters handed back."""
    scores = result.final_scores()
    out = []
    for g, member in result.handed_back().items():
        entry = {"group": g, "seed": result.plan.seeds[g], "member": member}
        if member is not None:
            entry["score"] = float(scores[member])
            entry["hp"] = {k: shortest(v[member]) for k, v in result.hp.items()}
        out.append(entry)
    return out


def write_summary(result: SearchResult, path: Path) -> Path:
    picks = handed_back(result)
    values = np.asarray([p.get("score", np.nan) for p in picks], np.float64)
    iqm, low, high = stats.interval_estimates({"x": values})["x"]
    strategy = dataclasses.asdict(result.strategy)
    summary = {
        "algo": algorithm_of(result.plan.base).name,
        "env": result.plan.base.env,
        "strategy": dict(name=result.strategy.name, **strategy),
        "members": result.members,
        "seeds": list(result.plan.seeds),
        "searched": list(result.searched),
        "rounds": len(result.lengths),
        "rounds_done": result.done,
        "round_updates": result.lengths[0],
        "score_episodes": result.score_episodes,
        "env_steps": result.env_steps,
        "handed_back": picks,
        "handed_back_iqm": iqm,
        "handed_back_ci_low": low,
        "handed_back_ci_high": high,
        "best_member": result.best_member,
        "nonfinite": [
            {"round": r, "member": m, "trial": t} for r, m, t in result.nonfinite()
        ],
        "timing": {
            "rounds_s": float(sum(result.round_seconds)),
            "steps_s": float(sum(result.step_seconds)),
            "step_share": result.steps_share,
        },
        "programs_compiled": result.programs_compiled,
        "seconds": round(result.seconds, 3),
        "interrupted": result.interrupted,
        "resumed_from": result.resumed_from,
        "devices": jax.device_count(),
        "processes": jax.process_count(),
    }
    return write_json(path, summary)


def save_params(result: SearchResult, out: Path) -> Path | None:
    """``members/params-*.npz``: every member's final parameters, its spec
    with its final hyperparameters."""
    members = {}
    for m in result.plan.members:
        hp = {k: shortest(v[m.index]) for k, v in result.hp.items()}
        config = m.config.replace(**hp)
        ok = all(
            np.all(np.isfinite(x)) for x in jax.tree.leaves(result.params[m.index])
        )
        spec = member_files.member_spec(config, m.seed, dict(m.env_params), ok)
        members[m.index] = (spec, result.params[m.index])
    return member_files.save_params(out / MEMBERS_DIR, members)


def write_curves(result: SearchResult, path: Path) -> Path:
    done = sum(result.lengths[: result.done])
    steps = np.arange(1, done + 1) * result.config.steps_per_update
    arrays = {}
    for i in range(result.members):
        for name, values in (result.curves or {}).items():
            arrays[f"member_{i}_{name}"] = values[i, :done]
        arrays[f"member_{i}_env_steps"] = steps
    np.savez_compressed(path, **arrays)
    return path


def write_outputs(result: SearchResult, out: Path) -> list[Path]:
    """Writes every file listed in the module docstring into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    picks = handed_back(result)
    profile = {
        result.strategy.name: [p.get("score", np.nan) for p in picks],
    }
    writers = {
        "sweep.csv": lambda path: write_rows(result.rows(), path),
        "curves.npz": lambda path: write_curves(result, path),
        "lineage.csv": lambda path: write_lineage(result, path),
        "lineage.png": lambda path: plot_lineage(result, path),
        "profile.png": lambda path: stats.plot_performance_profiles(
            profile,
            path,
            xlabel=f"handed-back member's score τ (last {result.score_episodes} "
            "episodes)",
            title=f"{result.plan.base.env}: {len(picks)} search seed(s)",
        ),
        MEMBERS_DIR: lambda path: save_params(result, out),
        "summary.json": lambda path: write_summary(result, path),
    }
    return write_each(out, writers)  # a failure names its file


def print_result(result: SearchResult, out: Path | None = None) -> None:
    """Each group's handed-back member, their IQM, non-finite members, the
    time between rounds."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:
        console = Console(width=200)
    table = Table(
        title=f"{result.plan.base.env} {result.strategy.name}: handed back after "
        f"{result.done} of {len(result.lengths)} rounds"
    )
    for name in ("seed", "member", "score", *result.searched):
        table.add_column(name, justify="right")
    picks = handed_back(result)
    for p in picks:
        hp = p.get("hp", {})
        table.add_row(
            str(p["seed"]),
            "-" if p["member"] is None else str(p["member"]),
            f"{p['score']:.1f}" if "score" in p else "-",
            *(str(_fmt(hp[k])) if k in hp else "-" for k in result.searched),
        )
    console.print(table)
    values = np.asarray([p.get("score", np.nan) for p in picks])
    iqm, low, high = stats.interval_estimates({"x": values})["x"]
    console.print(
        f"IQM over {len(picks)} seed(s): {iqm:.1f} (95% CI {low:.1f} to {high:.1f})"
    )
    for r, m, t in result.nonfinite():
        console.print(
            f"member {m} (trial {t}) went non-finite in round {r}; "
            f"{'replaced' if r < len(result.lengths) else 'left as it is'}"
        )
    console.print(
        f"{result.members} members, {result.env_steps:,} env steps, "
        f"{result.programs_compiled} program(s) compiled, {result.seconds:.1f} s; "
        f"between rounds {100 * result.steps_share:.2f}% of the rounds' time"
        + (f"; files in {out}" if out is not None else "")
    )
