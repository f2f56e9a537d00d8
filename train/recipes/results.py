"""``make results``: train every shipped recipe, then rewrite README's table.

    python -m ondevice_rl.train.recipes.results               # train all, table
    python -m ondevice_rl.train.recipes.results --only minatar_breakout_ppo
    python -m ondevice_rl.train.recipes.results --table-only  # from runs/results

Each recipe runs as ``ondevice-rl train --recipe NAME --out
runs/results/NAME --force`` (seed 0; a subprocess, so one failure does not
stop the others). The table between ``<!-- results:start -->`` and
``<!-- results:end -->`` in README.md gets one row per recipe with a run:
env, env steps, final return (the run's own: the mean of the last
``FINAL_WINDOW`` updates' ``episode_return``, as ``config.json`` records it)
and a link to the curve, copied to ``docs/results/NAME.png``.
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

START, END = "<!-- results:start -->", "<!-- results:end -->"


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
    final = f"{final_return:.1f}" if finite else "n/a"
    config = load_recipe(name)
    curve = run_dir / CURVE_FILE
    link = ""
    if curve.exists():
        docs.mkdir(parents=True, exist_ok=True)
        target = docs / f"{name}.png"
        shutil.copyfile(curve, target)
        link = f"[curve]({target.relative_to(readme_dir).as_posix()})"
    return (
        f"| `{name}` | {algorithm_of(config).name} | `{config.env}` | "
        f"{int(rows[-1]['env_steps']):,} | {final} | {link} | {describe(name)} |"
    )


def table(names: list[str], runs: Path, docs: Path, readme_dir: Path) -> str:
    lines = [
        "| recipe | algo | env | env steps | final return (seed 0) | curve | about |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in names:
        row = summarize(name, runs / name, docs, readme_dir)
        if row is not None:
            lines.append(row)
    return "\n".join(lines)


def rewrite_readme(readme: Path, text: str) -> None:
    """Replaces what lies between the markers (ValueError if they are missing)."""
    content = readme.read_text()
    start, end = content.find(START), content.find(END)
    if start < 0 or end < start:
        raise ValueError(f"{readme} has no {START} ... {END} markers")
    head, tail = content[: start + len(START)], content[end:]
    readme.write_text(f"{head}\n{text}\n{tail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="recipes to train (default: all)")
    parser.add_argument("--table-only", action="store_true", help="train nothing")
    parser.add_argument("--runs", type=Path, default=Path("runs/results"))
    parser.add_argument("--docs", type=Path, default=Path("docs/results"))
    parser.add_argument("--readme", type=Path, default=Path("README.md"))
    args = parser.parse_args(argv)
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
    text = table(names, args.runs, args.docs.resolve(), readme_dir)
    rewrite_readme(args.readme, text)
    print(text)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
