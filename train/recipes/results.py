"""``make results``: train every shipped recipe, then rewrite README's table.

    python -m ondevice_rl.train.recipes.results               # train all, table
    python -m ondevice_rl.train.recipes.results --only minatar_breakout_ppo
    python -m ondevice_rl.train.recipes.results --table-only  # from runs/results
    python -m ondevice_rl.train.recipes.results --seeds-table  # docs/recipes.md

Each recipe runs as ``ondevice-rl train --recipe NAME --out
runs/results/NAME --force`` (seed 0; a subprocess, so one failure does not
stop the others). The table between ``<!-- results:start -->`` and
``<!-- results:end -->`` in README.md gets one row per recipe with a run:
env, env steps, final return (the run's own: the mean of the last
``FINAL_WINDOW`` updates' ``episode_return``, as ``config.json`` records it),
the result over seeds where ``docs/results/NAME_seeds.json`` holds one (IQM
[95% CI], the worst seed and n) and a link to the curve, copied to
``docs/results/NAME.png``. A recipe with no run under ``--runs`` (``--only``
on a fresh machine) keeps its row as README has it, its cell over seeds
refreshed, so training one recipe never drops the others' rows; one with
neither a run nor a row gets its row from its record over seeds alone.

The table between ``<!-- seeds:start -->`` and ``<!-- seeds:end -->`` in
docs/recipes.md gets one row per ``docs/results/NAME_seeds.json``, the record
``ondevice-rl seeds`` writes (``make recipe-seeds``
copies it there): the seeds and their keys, the IQM of the final return with
its 95% CI, the worst seed, each set's IQM and, where the final policies were
evaluated, the same for their deterministic episodes. ``--seeds-table``
rebuilds that table alone.

Both tables state each figure's keys (seed ``s``: ``jax.random.key(s)``)
and, beside it, the recipe on keys it was neither tuned nor stated on:
``docs/results/NAME_fresh.json``, the record of ``ondevice-rl seeds NAME
--keys 100..107`` (``make recipe-seeds-fresh``), with a note where its 95%
CI misses the stated one.
"""

import argparse
import math
import shutil
import subprocess
import sys
from pathlib import Path

from ondevice_rl.train.kit.registry import algorithm_of
from ondevice_rl.train.recipes.loader import describe, list_recipes, load_recipe
from ondevice_rl.train.run.artifacts import (
    CONFIG_FILE,
    CURVE_FILE,
    METRICS_FILE,
    RunDirError,
    read_json,
    read_metrics,
)
from ondevice_rl.train.sweep.seed_sets import number, stated

START, END = "<!-- results:start -->", "<!-- results:end -->"
SEEDS_START, SEEDS_END = "<!-- seeds:start -->", "<!-- seeds:end -->"
SEEDS_SUFFIX = "_seeds.json"
#: The record over keys the recipe was neither tuned nor stated on.
FRESH_SUFFIX = "_fresh.json"


def train_recipe(name: str, runs: Path) -> int:
    """Trains ``name`` into ``runs/NAME``; returns the CLI's exit status."""
    cli = "import sys; from ondevice_rl.train.cli import main; sys.exit(main())"
    command = [sys.executable, "-c", cli, "train"]
    command += ["--recipe", name, "--out", str(runs / name), "--force"]
    print("$", " ".join(command), flush=True)
    return subprocess.run(command).returncode


def summarize(name: str, run_dir: Path, docs: Path, readme_dir: Path) -> str | None:
    """One Markdown table row for a finished run (None if it has no metrics)."""
    metrics = run_dir / METRICS_FILE
    if not metrics.exists():
        return None
    rows = read_metrics(metrics)
    if not rows:
        return None
    try:
        final_return = read_json(run_dir / CONFIG_FILE).get("final_return")
    except RunDirError:
        final_return = None
    finite = isinstance(final_return, int | float) and math.isfinite(final_return)
    final = number(final_return) if finite else "n/a"
    curve = run_dir / CURVE_FILE
    link = ""
    if curve.exists():
        docs.mkdir(parents=True, exist_ok=True)
        target = docs / f"{name}.png"
        shutil.copyfile(curve, target)
        link = f"[curve]({target.relative_to(readme_dir).as_posix()})"
    return _row(name, f"{int(rows[-1]['env_steps']):,}", final, link, docs)


def _row(name: str, steps: str, seed_0: str, curve: str, docs: Path) -> str:
    """README's row: algo, env and description from the recipe, the cell
    over seeds from its record."""
    config = load_recipe(name)
    return (
        f"| `{name}` | {algorithm_of(config).name} | `{config.env}` | {steps} | "
        f"{seed_0} | {over_seeds(name, docs)} | {on_fresh_keys(name, docs)} | "
        f"{curve} | {describe(name)} |"
    )


def over_seeds(name: str, docs: Path) -> str:
    """``IQM [low, high], worst W (n = N)`` from ``docs/NAME_seeds.json``,
    or ``–`` where the recipe has no record over seeds."""
    path = docs / f"{name}{SEEDS_SUFFIX}"
    if not path.exists():
        return "–"
    record = read_json(path)
    whole = record["sets"][-1]
    iqm, worst = stated(whole, "final_return")
    return f"{iqm}, worst {worst.split(' (')[0]} (keys {keys_of(record)})"


def on_fresh_keys(name: str, docs: Path) -> str:
    """The same from ``docs/NAME_fresh.json`` (``ondevice-rl seeds NAME
    --keys 100..107``), saying where its interval misses the stated one;
    ``–`` where there is none yet."""
    path = docs / f"{name}{FRESH_SUFFIX}"
    if not path.exists():
        return "–"
    record = read_json(path)
    whole = record["sets"][-1]
    iqm, worst = stated(whole, "final_return")
    cell = f"{iqm}, worst {worst.split(' (')[0]} (keys {keys_of(record)})"
    stated_path = docs / f"{name}{SEEDS_SUFFIX}"
    if stated_path.exists():
        low, high = read_json(stated_path)["sets"][-1]["ci"]
        if whole["ci"][1] < low or whole["ci"][0] > high:
            cell += "; outside the stated interval"
    return cell


def keys_of(record: dict) -> str:
    """The seeds of a record, ``A–B`` or ``a, b, c`` (key
    ``jax.random.key(s)`` each): its ``keys``, else its sets' labels."""
    if record.get("keys"):
        text = record["keys"].replace("..", "-")
    else:  # records written before the keys were kept: consecutive seeds
        first = record["sets"][0]["seeds"].split()[-1]
        last = record["sets"][-2 if len(record["sets"]) > 1 else -1]["seeds"]
        text = f"{first.split('-')[0]}-{last.split()[-1].split('-')[-1]}"
    if "," in text:
        return ", ".join(text.split(","))
    low, _, high = text.partition("-")
    return f"{low}–{high}" if high and high != low else low


def readme_rows(readme: Path) -> dict[str, list[str]]:
    """The cells of each recipe's row in README's results table, by name."""
    content = readme.read_text() if readme.exists() else ""
    start, end = content.find(START), content.find(END)
    rows = {}
    for line in content[start:end].splitlines()[1:] if start >= 0 else []:
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells
    return rows


def kept_row(name: str, cells: list[str], docs: Path) -> str:
    """A row without a run: README's env steps, seed 0 and curve as they
    stand (a row without a curve came from the record over seeds, and is
    rebuilt from it), the rest new (rows written before the column over
    seeds existed gain it)."""
    steps, seed_0, curve = cells[3], cells[4], cells[-2]
    if curve == "–" and (docs / f"{name}{SEEDS_SUFFIX}").exists():
        return record_row(name, docs)
    return _row(name, steps, seed_0, curve, docs)


def record_row(name: str, docs: Path) -> str | None:
    """A row from the recipe's record over seeds alone (no run, no README
    row): seed 0's final return where the record holds seed 0, no curve."""
    path = docs / f"{name}{SEEDS_SUFFIX}"
    if not path.exists():
        return None
    record = read_json(path)
    whole = record["sets"][-1]
    seed_0 = number(whole["final_returns"][0]) if first_seed(record) == 0 else "–"
    return _row(name, f"{record['total_timesteps']:,}", seed_0, "–", docs)


def first_seed(record: dict) -> int:
    """The first seed of a ``seed_sets`` record (its sets are labelled
    ``seeds A-B``)."""
    return int(record["sets"][0]["seeds"].split()[-1].split("-")[0])


def table(
    names: list[str],
    runs: Path,
    docs: Path,
    readme_dir: Path,
    kept: dict[str, list[str]] | None = None,
) -> str:
    lines = [
        "| recipe | algo | env | env steps | final return (seed 0) "
        "| over seeds: IQM [95% CI], worst (keys) | on fresh keys | curve | about |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in names:
        row = summarize(name, runs / name, docs, readme_dir)
        if row is None and name in (kept or {}):
            row = kept_row(name, kept[name], docs)
        if row is None:
            row = record_row(name, docs)
        if row is not None:
            lines.append(row)
    return "\n".join(lines)


def rewrite_readme(readme: Path, text: str) -> None:
    """Replaces what lies between the results markers (ValueError if they
    are missing)."""
    rewrite_between(readme, START, END, text)


def rewrite_between(path: Path, start_marker: str, end_marker: str, text: str):
    """Replaces what lies between two markers of ``path`` (ValueError if
    they are missing)."""
    content = path.read_text()
    start, end = content.find(start_marker), content.find(end_marker)
    if start < 0 or end < start:
        raise ValueError(f"{path} has no {start_marker} ... {end_marker} markers")
    head, tail = content[: start + len(start_marker)], content[end:]
    path.write_text(f"{head}\n{text}\n{tail}")


def seeds_row(name: str, record: dict, docs: Path) -> str:
    """One Markdown row of a ``seed_sets`` record: its sets are consecutive
    seed ranges labelled ``seeds A-B``, then the row over all of them."""
    *sets, whole = record["sets"]
    first = first_seed(record)
    last = sets[-1]["seeds"].split()[-1].split("-")[-1]
    final, worst = stated(whole, "final_return")
    per_set = " / ".join(number(s["iqm"]) for s in sets)
    evaluated = "–"
    if "eval" in whole:
        iqm, worst_eval = stated(whole["eval"], "eval_return")
        evaluated = f"{iqm}, worst {worst_eval}; {record['eval_episodes']} episodes"
    return (
        f"| `{name}` | {record['total_timesteps']:,} | {first}–{last} "
        f"({whole['n']}) | {final} | {worst} | {per_set} | {evaluated} | "
        f"{on_fresh_keys(name, docs)} |"
    )


def seeds_table(docs: Path) -> str:
    """The table of every ``docs/NAME_seeds.json``, sorted by name."""
    lines = [
        "| recipe | env steps | seeds (n) | IQM final return [95% CI] | worst "
        "seed | IQM per set of seeds | deterministic evaluation: IQM [95% CI] "
        "| on fresh keys: IQM [95% CI], worst (keys) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for path in sorted(docs.glob(f"*{SEEDS_SUFFIX}")):
        name = path.name[: -len(SEEDS_SUFFIX)]
        lines.append(seeds_row(name, read_json(path), docs))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="recipes to train (default: all)")
    parser.add_argument("--table-only", action="store_true", help="train nothing")
    parser.add_argument("--runs", type=Path, default=Path("runs/results"))
    parser.add_argument("--docs", type=Path, default=Path("docs/results"))
    parser.add_argument("--readme", type=Path, default=Path("README.md"))
    parser.add_argument("--recipes-page", type=Path, default=Path("docs/recipes.md"))
    parser.add_argument(
        "--seeds-table", action="store_true",
        help="only rebuild the recipes page's table of results over seeds",
    )  # fmt: skip
    args = parser.parse_args(argv)
    seeds = seeds_table(args.docs)
    rewrite_between(args.recipes_page, SEEDS_START, SEEDS_END, seeds)
    if args.seeds_table:
        print(seeds)
        return 0
    names = list_recipes()
    unknown = sorted(set(args.only or []) - set(names))
    if unknown:
        parser.error(f"unknown recipes: {', '.join(unknown)}")
    failed = []
    if not args.table_only:
        for name in args.only or names:
            if train_recipe(name, args.runs) != 0:
                failed.append(name)
    readme_dir = args.readme.resolve().parent
    kept = readme_rows(args.readme)
    text = table(names, args.runs, args.docs.resolve(), readme_dir, kept)
    rewrite_readme(args.readme, text)
    print(text)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
