"""``ondevice-rl sweep --strategy pbt|halving``: a population that searches
as it trains (``ondevice_rl.train.sweep.engine``).

The search space is the sweep's: hyperparameter flags with
``loguniform:LOW:HIGH``/``uniform:LOW:HIGH`` (and ``--samples`` members per
seed) or comma lists; every ``--seeds`` seed is one search of its own. The
population trains in rounds of ``--round-updates`` updates and is
checkpointed after each; ``sweep --resume`` continues from the newest
checkpoint and ends as the uninterrupted search would.
"""

import argparse
import sys
from pathlib import Path

from ondevice_rl.train.cli.args import int_arg
from ondevice_rl.train.cli.sweep_specs import CLIError, interrupted
from ondevice_rl.train.sweep import STRATEGIES, check_plan, run_plan
from ondevice_rl.train.sweep.engine import DEFAULT_SCORE_EPISODES
from ondevice_rl.train.sweep.report import write_outputs
from ondevice_rl.train.sweep.terminal import print_plan, print_result

#: Flags of each strategy's settings: flag -> (strategy, field).
_SETTINGS = {
    "--fraction": ("pbt", "fraction"),
    "--resample-prob": ("pbt", "resample_prob"),
    "--eta": ("halving", "eta"),
    "--min-rounds": ("halving", "min_rounds"),
    "--brackets": ("halving", "brackets"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "search strategies",
        "act on the population between rounds, on the device (all members of a "
        "seed form one search; the whole population is one program)",
    )
    group.add_argument(
        "--strategy",
        choices=("pbt", "halving"),
        help="pbt: the worst members copy the best's whole learning state and "
        "perturb its hyperparameters; halving: successive halving, stopped "
        "members' slots refilled with fresh samples",
    )
    group.add_argument(
        "--round-updates",
        type=int_arg,
        metavar="K",
        help="updates per round (default: about 20 rounds)",
    )
    group.add_argument(
        "--score-episodes",
        type=int_arg,
        metavar="N",
        help="a member's score: mean return of its last N episodes (default 20)",
    )
    group.add_argument(
        "--fraction",
        type=float,
        metavar="F",
        help="pbt: share of each seed's members that copies, and is copied "
        "from, each round (default 0.25)",
    )
    group.add_argument(
        "--resample-prob",
        type=float,
        metavar="P",
        help="pbt: chance that explore resamples a value instead of scaling it "
        "by 0.8 or 1.25 (default 0.25)",
    )
    group.add_argument(
        "--eta",
        type=int_arg,
        metavar="E",
        help="halving: 1/E of a cohort goes on at each rung (default 2)",
    )
    group.add_argument(
        "--min-rounds",
        type=int_arg,
        metavar="R",
        help="halving: rounds before a trial's first rung (default 1)",
    )
    group.add_argument(
        "--brackets",
        type=int_arg,
        metavar="B",
        help="halving: Hyperband-style brackets, bracket b first judged after "
        "R*eta^b rounds (default 1)",
    )


def read_strategy(args) -> dict | None:
    """``sweep.json``'s ``strategy``: ``{"name", settings...}`` (None: a
    plain sweep); one-line ``CLIError`` for a setting of another strategy."""
    given = {
        flag: getattr(args, field)
        for flag, (_, field) in _SETTINGS.items()
        if getattr(args, field) is not None
    }
    if args.strategy is not None and args.chunk_size is not None:
        raise CLIError("--chunk-size: a search runs its population as one program")
    if args.strategy is None:
        extra = [*given]
        extra += ["--round-updates"] * (args.round_updates is not None)
        extra += ["--score-episodes"] * (args.score_episodes is not None)
        if extra:
            raise CLIError(f"{extra[0]} needs --strategy")
        return None
    settings = {"name": args.strategy}
    for flag, value in given.items():
        owner, field = _SETTINGS[flag]
        if owner != args.strategy:
            raise CLIError(f"{flag} is a {owner} setting, not {args.strategy}'s")
        settings[field] = value
    build_strategy(settings)  # checked now, before anything starts
    return settings


def build_strategy(settings: dict):
    """The strategy object of ``sweep.json``'s ``strategy``."""
    fields = {k: v for k, v in settings.items() if k != "name"}
    try:
        return STRATEGIES[settings["name"]](**fields)
    except (TypeError, KeyError) as err:
        raise CLIError(f"strategy {settings!r}: {err}") from None


def _options(asked: dict) -> dict:
    return {
        "strategy": build_strategy(asked["strategy"]),
        "round_updates": asked.get("round_updates"),
        "score_episodes": asked.get("score_episodes") or DEFAULT_SCORE_EPISODES,
        "memory_budget_bytes": asked.get("memory_budget"),
    }


def check(asked: dict, plan) -> None:
    """One-line ``SweepSpecError`` for a search this machine cannot run
    (before anything is written or compiled)."""
    check_plan(plan, **_options(asked))


def run(args, out: Path, asked: dict, plan, main: bool) -> int:
    """Trains (or resumes) the search and writes its report."""
    if main:
        print_plan(plan)
    result = run_plan(
        plan,
        progress=not args.no_progress,
        checkpoints=out,  # every process reads a checkpoint; the main one writes
        resume=args.resume,
        sample_seed=asked.get("sample_seed") or 0,
        **_options(asked),
    )
    lineage = result.lineage
    for note in lineage.notes:
        print(note, file=sys.stderr)
    if lineage.resumed_from and main:
        print(f"resumed after round {lineage.resumed_from}", file=sys.stderr)
    if main:
        write_outputs(result, out)
        print_result(result, out)
    if result.interrupted:
        kept = f"stopped after round {lineage.done} of {len(lineage.lengths)}"
        return interrupted(kept, out, result.stop_signal)
    return 0
