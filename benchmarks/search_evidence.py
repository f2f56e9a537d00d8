"""The search strategies' figures of docs/sweeps.md ("Comparing strategies").

``python benchmarks/search_evidence.py`` (``make search-evidence``, hours on
a CPU) runs ``ondevice-rl sweep compare`` for PPO on Acrobot (16 members x
20 search seeds), successive halving judged after four rounds there on two
disjoint sets of 20 search seeds, then joined, and DQN on CartPole (16
members x 5 search seeds), each into ``runs/compare/NAME``, and draws each
comparison's ``compare.png``: the evaluation returns per search seed with
each method's IQM and 95% CI, and each method's performance profile,
titled with the machine it ran on. ``merge DIR DIR ... --out DIR`` joins
comparisons of the same task on disjoint search seeds (trains nothing).
"""

import argparse
import json
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from ondevice_rl.train.cli import main as cli
from ondevice_rl.train.run.artifacts import write_json
from ondevice_rl.train.services.machine import label
from ondevice_rl.train.sweep import stats
from ondevice_rl.train.sweep.compare import table, with_differences

RUNS = Path("runs/compare")
ACROBOT = ["--recipe", "acrobot_ppo", "--total-timesteps", "100000", "--members", "16"]
HALVING_LATE = ["--methods", "random,halving", "--halving-spend", "slots"]
HALVING_LATE += ["--min-rounds", "4", "--search-seeds", "20"]
#: name -> the comparison's ``ondevice-rl sweep compare`` flags.
COMPARISONS = {
    "acrobot_ppo": [*ACROBOT, "--search-seeds", "20"],
    "acrobot_ppo_halving_min4_0": [*ACROBOT, *HALVING_LATE, "--first-seed", "0"],
    "acrobot_ppo_halving_min4_20": [*ACROBOT, *HALVING_LATE, "--first-seed", "20"],
    "cartpole_dqn": [
        "--recipe", "cartpole_dqn", "--total-timesteps", "100000",
        "--members", "16", "--search-seeds", "5",
    ],
}  # fmt: skip
#: name -> the comparisons it joins.
MERGED = {
    "acrobot_ppo_halving_min4": [
        "acrobot_ppo_halving_min4_0",
        "acrobot_ppo_halving_min4_20",
    ]
}


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


def _bounds(scores: dict) -> tuple[float, float]:
    values = np.concatenate([v[np.isfinite(v)] for v in scores.values()] or [[0.0]])
    low, high = float(values.min(initial=0.0)), float(values.max(initial=1.0))
    return low, high if high > low else low + 1.0


def draw(record: dict, path: Path) -> Path:
    """``compare.png``: returns per search seed, IQM and CI; profiles."""
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
    fig.savefig(path)
    plt.close(fig)
    return path


def merge(folders: list[Path], out: Path) -> dict:
    """Joins the comparisons in ``folders`` into ``out`` (record, table,
    figure)."""
    records = [json.loads((d / "compare.json").read_text()) for d in folders]
    record = merge_records(records)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "compare.json", record)
    (out / "compare.md").write_text(table(record))
    draw(record, out / "compare.png")
    return record


def evidence() -> int:
    """Every comparison of the docs, its figure, and the joined ones."""
    for name, flags in COMPARISONS.items():
        out = RUNS / name
        status = cli(["sweep", "compare", *flags, "--out", str(out)])
        if status:
            return status
        draw(json.loads((out / "compare.json").read_text()), out / "compare.png")
    for name, parts in MERGED.items():
        print(table(merge([RUNS / p for p in parts], RUNS / name)), end="")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parts = parser.add_subparsers(dest="part")
    joined = parts.add_parser("merge", help="join comparisons on disjoint seeds")
    joined.add_argument("folders", nargs="+", type=Path, metavar="DIR")
    joined.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.part == "merge":
        print(table(merge(args.folders, args.out)), end="")
        return 0
    return evidence()


if __name__ == "__main__":
    sys.exit(main())
