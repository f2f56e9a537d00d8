"""Files and terminal output of a sweep (used by ``ondevice-rl sweep``).

Files written into the output directory:

* ``sweep.csv``: one row per finished member (``SweepResult.rows``);
* ``ranking.csv``: one row per setting, best first (``SweepResult.ranking``),
  with the IQM of ``last10pct_return`` over its seeds and its stratified
  bootstrap 95% CI (``stats.py``);
* ``curves.npz``: every member's metrics ``[num_updates]`` and env steps;
* ``curves.png``: mean ± std over seeds of the best ``top`` settings;
* ``profile.png``: performance profiles (``last10pct_return`` over seeds) of
  the best ``top`` settings;
* ``summary.json``: learner, fixed (single-valued) changes, best setting,
  best member, members that went non-finite, groups, programs compiled, wall
  time; numbers stay numbers.
"""

import csv
from pathlib import Path
from typing import Any

import jax

from ondevice_rl.train.kit.registry import algorithm_of
from ondevice_rl.train.run.artifacts import write_json
from ondevice_rl.train.services.writes import write_each
from ondevice_rl.train.sweep import stats
from ondevice_rl.train.sweep.results import SweepResult, _fmt, format_values, scores
from ondevice_rl.train.sweep.space import SweepPlan

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


def setting_intervals(result: SweepResult) -> dict[int, tuple[float, float, float]]:
    """Per ranked setting: IQM and 95% CI of ``last10pct_return`` over its
    finite seeds."""
    nonfinite = result.nonfinite
    by_setting: dict[int, list[float]] = {}
    for m in result.finished:
        if m.index not in nonfinite:
            value = scores(result.returns(m))["last10pct_return"]
            by_setting.setdefault(m.setting, []).append(value)
    return stats.interval_estimates({s: v for s, v in by_setting.items()})


def write_ranking(result: SweepResult, path: Path) -> Path:
    """``ranking.csv``: rank, setting, swept values, seeds and scores."""
    swept = list(result.plan.swept)
    intervals = setting_intervals(result)
    columns = [
        "rank",
        "setting",
        *swept,
        "seeds",
        "diverged",
        "last10pct_mean",
        "last10pct_std",
        *INTERVAL_KEYS,
        "final_mean",
        "auc_mean",
    ]
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        for rank, s in enumerate(result.ranking(), 1):
            interval = intervals[s.setting]
            writer.writerow(
                [
                    rank,
                    s.setting,
                    *(_fmt(s.values[k]) for k in swept),
                    len(s.seeds),
                    s.diverged,
                    _fmt(s.last10pct_mean),
                    _fmt(s.last10pct_std),
                    *(_fmt(x) for x in interval),
                    _fmt(s.final_mean),
                    _fmt(s.auc_mean),
                ]
            )
    return path


def write_summary(result: SweepResult, path: Path) -> Path:
    """``summary.json``: best setting and member, non-finite members, groups,
    compile count, timing."""
    best = result.best
    interval = setting_intervals(result).get(best.setting) if best else None
    summary = {
        "algo": algorithm_of(result.plan.base).name,
        "env": result.plan.base.env,
        "fixed": {k: json_value(v) for k, v in result.plan.fixed.items()},
        "members": len(result.plan.members),
        "finished": len(result.finished),
        "interrupted": result.interrupted,
        "programs_compiled": result.programs_compiled,
        "seconds": round(result.seconds, 3),
        "devices": jax.device_count(),
        "processes": jax.process_count(),
        "best": None
        if best is None
        else {
            "setting": best.setting,
            "values": {k: json_value(v) for k, v in best.values.items()},
            "seeds": list(best.seeds),
            "last10pct_mean": best.last10pct_mean,
            "last10pct_std": best.last10pct_std,
            **(dict(zip(INTERVAL_KEYS, interval, strict=True)) if interval else {}),
            "final_mean": best.final_mean,
            "auc_mean": best.auc_mean,
        },
        "best_member": result.best_member,
        "nonfinite": {str(i): why for i, why in result.nonfinite.items()},
        "groups": [
            {
                "config": {k: json_value(v) for k, v in g.config.to_dict().items()},
                "members": g.members,
                "chunk_size": g.chunk_size,
                "num_chunks": g.num_chunks,
                "compiled": g.compiled,
                "estimated_bytes_per_member": g.estimated_bytes_per_member,
                "program_bytes": g.program_bytes,
            }
            for g in result.groups
        ],
    }
    return write_json(path, summary)


def write_profile(result: SweepResult, path: Path, top: int = 10) -> Path:
    """``profile.png``: performance profiles of the best ``top`` settings."""
    nonfinite = result.nonfinite
    ranked = result.ranking()[:top]
    by_setting = {}
    for s in ranked:
        members = [
            m
            for m in result.finished
            if m.setting == s.setting and m.index not in nonfinite
        ]
        label = format_values(s.values) or "base config"
        by_setting[label] = [
            scores(result.returns(m))["last10pct_return"] for m in members
        ]
    return stats.plot_performance_profiles(
        by_setting,
        path,
        xlabel="mean return over the last 10% of updates (τ)",
        title=f"{result.plan.base.env}: runs above τ, best {len(ranked)} settings",
    )


def write_outputs(result: SweepResult, out: Path, top: int = 10) -> list[Path]:
    """Writes every file listed in the module docstring into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    writers = {
        "sweep.csv": result.write_csv,
        "ranking.csv": lambda path: write_ranking(result, path),
        "curves.npz": result.write_curves,
        "curves.png": lambda path: result.plot_curves(path, top=top),
        "profile.png": lambda path: write_profile(result, path, top=top),
        "summary.json": lambda path: write_summary(result, path),
    }
    return write_each(out, writers)  # a failure names its file


def print_plan(plan: SweepPlan) -> None:
    """One line on stdout (stderr is for progress and errors): members,
    settings, seeds, devices."""
    from rich.console import Console

    Console().print(
        f"[bold]{plan.base.env}[/]: {len(plan.members)} members = "
        f"{plan.num_settings} settings × {len(plan.seeds)} seeds, on "
        f"{jax.device_count()} device(s) in {jax.process_count()} process(es)"
    )


def print_result(result: SweepResult, out: Path | None = None, top: int = 10) -> None:
    """The ranking (rich table), the best setting and what was compiled."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:  # a pipe or file: do not squeeze into 80 columns
        console = Console(width=200)
    ranking = result.ranking()
    swept = list(result.plan.swept)
    table = Table(
        title=f"{result.plan.base.env} sweep: best {min(top, len(ranking))}"
        f" of {len(ranking)} settings"
    )
    table.add_column("rank", justify="right")
    for name in swept:
        table.add_column(name, justify="right")
    table.add_column("seeds", justify="right")
    table.add_column("last 10% return", justify="right")
    table.add_column("final", justify="right")
    table.add_column("AUC", justify="right")
    for rank, s in enumerate(ranking[:top], 1):
        table.add_row(
            str(rank),
            *(str(_fmt(s.values[k])) for k in swept),
            str(len(s.seeds)),
            f"{s.last10pct_mean:.1f} ± {s.last10pct_std:.1f}",
            f"{s.final_mean:.1f}",
            f"{s.auc_mean:.1f}",
        )
    console.print(table)
    best = result.best
    if best is not None:
        console.print(
            f"best: {format_values(best.values) or 'base config'} → "
            f"{best.last10pct_mean:.1f} ± {best.last10pct_std:.1f} over "
            f"{len(best.seeds)} seed(s)"
        )
    for index, why in result.nonfinite.items():
        member = result.plan.members[index]
        values = format_values(result.plan.setting_values(member))
        console.print(
            f"member {index} ({values or 'base config'}, seed {member.seed}): "
            f"{why}; left out of the ranking"
        )
    chunks = ", ".join(
        f"{g.members}→{g.num_chunks}×{g.chunk_size}" for g in result.groups
    )
    console.print(
        f"{len(result.groups)} group(s) [{chunks}], {result.programs_compiled} "
        f"program(s) compiled, {result.seconds:.1f} s"
        + (f"; files in {out}" if out is not None else "")
    )
