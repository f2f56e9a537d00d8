"""The comparison's files: ``compare.md`` (the table), ``compare.json`` and
``compare.png`` (evaluation returns per search seed and each method's
performance profile, titled with the machine)."""

from pathlib import Path

import numpy as np

from ondevice_rl.train.services.machine import label
from ondevice_rl.train.sweep import stats


def table(record: dict) -> str:
    lines = [
        "| method | env steps | eval return IQM [95% CI] | minus random [95% CI] "
        "| between rounds |",
        "|---|---|---|---|---|",
    ]
    for r in record["methods"]:
        diff = r.get("minus_random")
        shown = (
            ""
            if diff is None
            else (f"{diff['mean']:+.1f} [{diff['ci'][0]:+.1f}, {diff['ci'][1]:+.1f}]")
        )
        lines.append(
            f"| {r['method']} | {r['env_steps']:,} | {r['iqm']:.1f} "
            f"[{r['ci'][0]:.1f}, {r['ci'][1]:.1f}] | {shown} | "
            f"{100 * r['step_share']:.2f}% |"
        )
    return "\n".join(lines) + "\n"


def write_files(record: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ondevice_rl.train.run.artifacts import write_json

    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "compare.json", record)
    (out / "compare.md").write_text(table(record))
    scores = {r["method"]: np.asarray(r["eval_returns"]) for r in record["methods"]}
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), dpi=100)
    for k, (name, values) in enumerate(scores.items()):
        left.plot(np.full(len(values), k), values, "o", alpha=0.7)
        row = next(r for r in record["methods"] if r["method"] == name)
        left.errorbar(
            k + 0.15, row["iqm"],
            yerr=[[row["iqm"] - row["ci"][0]], [row["ci"][1] - row["iqm"]]],
            fmt="s", color="k", capsize=4,
        )  # fmt: skip
    left.set_xticks(range(len(scores)), list(scores))
    left.set_ylabel(f"eval return ({record['eval_episodes']} episodes)")
    left.set_title("per search seed; IQM and 95% CI")
    left.grid(alpha=0.3)
    taus = np.linspace(*_bounds(scores), 101)
    profiles, bands = stats.performance_profiles(scores, taus)
    for name, profile in profiles.items():
        (line,) = right.plot(taus, profile, label=name)
        right.fill_between(taus, *bands[name], alpha=0.2, color=line.get_color())
    right.set_xlabel("eval return τ")
    right.set_ylabel("fraction of search seeds above τ")
    right.legend()
    right.grid(alpha=0.3)
    title = f"{record['env']} {record['algo']}: {record['members']} members"
    if "machine" in record:
        title += f"\n{label(record['machine'])}"
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out / "compare.png")
    plt.close(fig)


def _bounds(scores: dict) -> tuple[float, float]:
    values = np.concatenate([v[np.isfinite(v)] for v in scores.values()] or [[0.0]])
    low, high = float(values.min(initial=0.0)), float(values.max(initial=1.0))
    return low, high if high > low else low + 1.0
