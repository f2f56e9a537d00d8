"""``ondevice-rl sweep compare``: random search, PBT and successive halving
on your task, paired by search seed.

Examples::

    ondevice-rl sweep compare --recipe acrobot_ppo --total-timesteps 100000
    ondevice-rl sweep compare --algo dqn --env CartPole-v1 --members 8 \\
        --search-seeds 10 --methods random,halving --halving-spend slots

Every method searches the same space (``--search NAME=SPEC``, default the
learner's ``DEFAULT_SPACES``) with the same ``--members`` per search seed
and the same env steps (halving: ``--halving-budget`` of them), hands back
its best member per search seed, and that member's deterministic policy
plays ``--eval-episodes`` episodes from keys training never used
(``ondevice_rl.train.sweep.compare``). Prints a table (IQM and 95% CI over
search seeds, the paired difference to random search, the time spent
between rounds) and writes ``compare.json`` (every number, the machine) and
``compare.md`` into ``--out``.
"""

import argparse
import sys
from pathlib import Path

from ondevice_rl.cpu.flags import use_cpu_cores
from ondevice_rl.train.cli.args import (
    add_cpu_devices_argument,
    int_arg,
    one_line_errors,
    positive_int_arg,
)
from ondevice_rl.train.cli.errors import WRITE_FAILED, fail
from ondevice_rl.train.cli.sweep_specs import CLIError, parse_spec, with_changes
from ondevice_rl.train.kit.config import config_from_dict
from ondevice_rl.train.kit.registry import DEFAULT, get_algorithm
from ondevice_rl.train.recipes.loader import load_recipe, recipe_algorithm
from ondevice_rl.train.run.artifacts import write_json
from ondevice_rl.train.services.machine import machine
from ondevice_rl.train.services.writes import write_whole
from ondevice_rl.train.sweep import SweepSpecError
from ondevice_rl.train.sweep.compare import (
    DEFAULT_SPACES,
    METHODS,
    Comparison,
    compare,
    table,
)

COMMAND = "sweep compare"


def add_parser(parts) -> None:
    """``compare`` under ``ondevice-rl sweep``."""
    parser = parts.add_parser(
        "compare",
        help="random search, PBT and successive halving on one task, paired",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("--algo", help="(default: the recipe's, or ppo)")
    add("--env", help="(default: the recipe's, or Acrobot-v1)")
    add("--recipe", help="a recipe's settings as the base config")
    add("--total-timesteps", type=positive_int_arg, default=200_000)
    add("--set", action="append", default=[], metavar="FIELD=VALUE",
        help="a config field (repeatable), e.g. num_envs=8")  # fmt: skip
    add("--search", action="append", default=[], metavar="NAME=SPEC",
        help="the space (repeatable); default: the learner's own")  # fmt: skip
    add("--members", type=positive_int_arg, default=16, help="N per search seed")
    add("--search-seeds", type=positive_int_arg, default=5)
    add("--first-seed", type=int_arg, default=0,
        help="search seeds FIRST .. FIRST + search seeds - 1")  # fmt: skip
    add("--methods", default=",".join(METHODS))
    add("--halving-budget", type=float, default=0.5)
    add("--halving-spend", choices=("length", "slots"), default="length",
        help="halving's budget as shorter slots (length) or fewer full-length "
        "slots (slots)")  # fmt: skip
    add("--eta", type=int_arg, default=2, help="halving's eta")
    add("--min-rounds", type=int_arg, default=1, help="halving's first rung (rounds)")
    add("--brackets", type=int_arg, default=1, help="halving's brackets")
    add("--round-updates", type=positive_int_arg, help="(default: about 20 rounds)")
    add("--score-episodes", type=positive_int_arg, default=20)
    add("--eval-episodes", type=positive_int_arg, default=32)
    add("--out", type=Path, default=Path("runs/compare"))
    add("--no-progress", action="store_true")
    add_cpu_devices_argument(parser)
    parser.set_defaults(func=run)
    one_line_errors(parser)


def base_config(args) -> tuple[str, object]:
    """``(learner, config)``: the recipe's (or the learner's defaults) on
    ``--env`` with ``--total-timesteps`` and the ``--set`` changes."""
    try:
        owner = recipe_algorithm(args.recipe) if args.recipe else None
        values = load_recipe(args.recipe).to_dict() if args.recipe else {}
    except (OSError, ValueError) as err:
        raise CLIError(f"--recipe: {err}") from None
    algo = args.algo or owner or DEFAULT
    if owner is not None and algo != owner:
        raise CLIError(f"--recipe {args.recipe} is for {owner}, not --algo {algo}")
    env = args.env or values.get("env") or "Acrobot-v1"
    values.update(env=env, total_timesteps=args.total_timesteps)
    values = with_changes(values, args.set)
    return algo, config_from_dict(values, get_algorithm(algo), where="--set")


def parse_space(items: list[str]) -> dict:
    """``name=loguniform:LOW:HIGH`` (or ``uniform:``, or a comma list)."""
    space = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.strip():
            raise CLIError(f"--search: expected NAME=SPEC, got {item!r}")
        space[name.strip()] = parse_spec(f"--search {name}", text, float)
    return space


def comparison(args) -> Comparison:
    first = args.first_seed
    if first < 0:
        raise CLIError(f"--first-seed: expected >= 0, got {first}")
    return Comparison(
        members=args.members,
        seeds=tuple(range(first, first + args.search_seeds)),
        methods=tuple(m.strip() for m in args.methods.split(",")),
        halving_budget=args.halving_budget,
        halving_spend=args.halving_spend,
        eta=args.eta,
        min_rounds=args.min_rounds,
        brackets=args.brackets,
        round_updates=args.round_updates,
        score_episodes=args.score_episodes,
        eval_episodes=args.eval_episodes,
        progress=not args.no_progress,
    )


def run(args) -> int:
    """Runs every method; writes the record and prints its table."""
    try:
        algo, config = base_config(args)
        search = parse_space(args.search) if args.search else DEFAULT_SPACES[algo]
        how = comparison(args)
        use_cpu_cores(args.cpu_devices)
        rows = compare(config, search, how)
    except (CLIError, SweepSpecError, ValueError, KeyError) as err:
        return fail(COMMAND, err)
    record = {
        "machine": machine(),
        "algo": algo,
        "env": config.env,
        "config": config.to_dict(),
        "search": {k: repr(v) for k, v in search.items()},
        "members": how.members,
        "search_seeds": list(how.seeds),
        "eval_episodes": how.eval_episodes,
        "halving": {
            "budget": how.halving_budget,
            "spend": how.halving_spend,
            "eta": how.eta,
            "min_rounds": how.min_rounds,
            "brackets": how.brackets,
        },
        "methods": rows,
    }
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        write_json(args.out / "compare.json", record)
        write_whole(args.out / "compare.md", lambda tmp: tmp.write_text(table(record)))
    except OSError as err:
        where = err.filename or args.out
        return fail(COMMAND, f"cannot write {where} ({err.strerror})", WRITE_FAILED)
    print(table(record), end="")
    print(f"wrote compare.json, compare.md into {args.out}", file=sys.stderr)
    return 0
