"""The comparison's files: ``compare.md`` (the table), ``compare.json`` and
``compare.png`` (evaluation returns per search seed and each method's
performance profile, titled with the machine)."""

from pathlib import Path

import numpy as np

from ondevice_rl.train.services.machine import label
from ondevice_rl.train.sweep import stats


def with_differences(rows: list[dict]) -> list[dict]:
    """``rows`` (one per method) with each method's paired difference to
    random search's evaluation returns, ``minus_random``: mean, 95% CI."""
    base = next((r for r in rows if r["method"] == "random"), None)
    for r in rows:
        if base is not None and r is not base:
            mean, low, high = stats.paired_difference(
                np.asarray(r["eval_returns"]), np.asarray(base["eval_returns"])
            )
            r["minus_random"] = {"mean": mean, "ci": [low, high]}
    return rows


def merge_records(records: list[dict]) -> dict:
    """Comparisons of the same task on disjoint search seeds as one: each
    method's per-seed numbers joined, its IQM, CI, paired difference and
    time shares recomputed over all the seeds, env steps and seconds summed;
    the record keeps each part's own summary under ``parts``."""
    methods = [r["method"] for r in records[0]["methods"]]
    rows = []
    for name in methods:
        parts = [next(m for m in r["methods"] if m["method"] == name) for r in records]
        returns = np.concatenate([p["eval_returns"] for p in parts])
        iqm, low, high = stats.interval_estimates({name: returns})[name]
        row = dict(parts[0], eval_returns=returns.tolist(), iqm=iqm, ci=[low, high])
        for field in ("training_scores", "handed_back_hp"):
            row[field] = [x for p in parts for x in p[field]]
        for field in ("env_steps", "rounds_s", "steps_s", "seconds"):
            row[field] = sum(p[field] for p in parts)
        row["step_share"] = row["steps_s"] / (row["rounds_s"] + row["steps_s"])
        row.pop("minus_random", None)
        rows.append(row)
    merged = dict(records[0], methods=with_differences(rows))
    merged["search_seeds"] = [s for r in records for s in r["search_seeds"]]
    merged["parts"] = [
        {
            "search_seeds": r["search_seeds"],
            "machine": r.get("machine"),
            "methods": {
                m["method"]: {k: m[k] for k in ("iqm", "ci") if k in m}
                | ({"minus_random": m["minus_random"]} if "minus_random" in m else {})
                for m in r["methods"]
            },
        }
        for r in records
    ]
    return merged


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
