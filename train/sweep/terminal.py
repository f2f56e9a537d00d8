"""What a sweep prints on stdout (stderr is for progress and errors): the
plan in one line, then the ranking of settings or, after a search, each
group's handed-back member."""

from pathlib import Path

import jax
from rich.console import Console
from rich.table import Table

from ondevice_rl.train.sweep.plan import SweepPlan
from ondevice_rl.train.sweep.report import handed_back, picks_interval
from ondevice_rl.train.sweep.result import SweepResult, format_values, formatted


def _console() -> Console:
    console = Console()
    if not console.is_terminal:  # a pipe or file: do not squeeze into 80 columns
        console = Console(width=200)
    return console


def print_plan(plan: SweepPlan) -> None:
    """Members, settings, seeds, devices."""
    Console().print(
        f"[bold]{plan.base.env}[/]: {len(plan.members)} members = "
        f"{plan.num_settings} settings × {len(plan.seeds)} seeds, on "
        f"{jax.device_count()} device(s) in {jax.process_count()} process(es)"
    )


def print_result(result: SweepResult, out: Path | None = None, top: int = 10) -> None:
    """The ranking (a search: the handed-back members), non-finite members
    and what was compiled."""
    if result.lineage is not None:
        _print_search(result, out)
        return
    console = _console()
    ranking, swept = result.ranking(), list(result.plan.swept)
    table = Table(
        title=f"{result.plan.base.env} sweep: best {min(top, len(ranking))}"
        f" of {len(ranking)} settings"
    )
    for name in ("rank", *swept, "seeds", "last 10% return", "final", "AUC"):
        table.add_column(name, justify="right")
    for rank, s in enumerate(ranking[:top], 1):
        table.add_row(
            str(rank),
            *(str(formatted(s.values[k])) for k in swept),
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


def _print_search(result: SweepResult, out: Path | None) -> None:
    """Each group's handed-back member, their IQM, non-finite members, the
    time between rounds."""
    console, lineage, searched = _console(), result.lineage, result.searched
    table = Table(
        title=f"{result.plan.base.env} {lineage.name}: handed back after "
        f"{lineage.done} of {len(lineage.lengths)} rounds"
    )
    for name in ("seed", "member", "score", *searched):
        table.add_column(name, justify="right")
    picks = handed_back(result)
    for p in picks:
        hp = p.get("hp", {})
        table.add_row(
            str(p["seed"]),
            "-" if p["member"] is None else str(p["member"]),
            f"{p['score']:.1f}" if "score" in p else "-",
            *(str(formatted(hp[k])) if k in hp else "-" for k in searched),
        )
    console.print(table)
    iqm, low, high = picks_interval(picks)
    console.print(
        f"IQM over {len(picks)} seed(s): {iqm:.1f} (95% CI {low:.1f} to {high:.1f})"
    )
    for r, m, t in lineage.nonfinite():
        console.print(
            f"member {m} (trial {t}) went non-finite in round {r}; "
            f"{'replaced' if r < len(lineage.lengths) else 'left as it is'}"
        )
    console.print(
        f"{len(result.plan.members)} members, {lineage.env_steps:,} env steps, "
        f"{result.programs_compiled} program(s) compiled, {result.seconds:.1f} s; "
        f"between rounds {100 * lineage.steps_share:.2f}% of the rounds' time"
        + (f"; files in {out}" if out is not None else "")
    )
