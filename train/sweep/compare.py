"""Search strategies compared fairly: random search, PBT and successive
halving on one task and budget, over several search seeds.

``python -m ondevice_rl.train.sweep.compare --algo ppo --env Acrobot-v1
--total-timesteps 200000 --members 16 --search-seeds 5 --out runs/compare``

* Every method searches the same space (``--search``, default the
  learner's ``DEFAULT_SPACES`` entry: the hyperparameters that matter most,
  within their declared ranges) with the same ``--members`` N per search
  seed; random search and PBT train every member for ``--total-timesteps``;
  successive halving gets ``--halving-budget`` of that (0.5: half the env
  steps, refills counted, since its slots never idle): by default as
  ``members`` slots of that fraction of the env steps each
  (``--halving-spend length``), or as that fraction of the slots, each
  trained as long as random search's members (``--halving-spend slots``:
  a trial that survives every rung gets the full budget).
* Search seed ``s`` draws the initial members with ``sample_seed=s`` and
  trains them from keys ``s * 1000 + i``: the methods start alike, seed by
  seed (paired).
* Each method hands back its best member by training score
  (``SearchResult.handed_back``); that member's deterministic policy is then
  evaluated on ``--eval-episodes`` (≥ 32 for the record) episodes from fresh
  keys, the same for every method.
* Reported per method: the evaluation returns per seed, their IQM and 95%
  CI, the env steps spent, the share of time spent between rounds (the
  exploit/explore overhead) and, for each method against random search, the
  mean paired difference over seeds with its bootstrap 95% CI.

Files in ``--out``: ``compare.json`` (every number), ``compare.md`` (the
table) and ``compare.png`` (evaluation returns per seed and each method's
performance profile).
"""

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from ondevice_rl.train.kit.registry import get_algorithm
from ondevice_rl.train.services.machine import machine
from ondevice_rl.train.sweep import stats
from ondevice_rl.train.sweep.compare_report import (
    merge_records,
    table,
    with_differences,
    write_files,
)
from ondevice_rl.train.sweep.member_eval import evaluate_members
from ondevice_rl.train.sweep.search import search_plan
from ondevice_rl.train.sweep.search_setup import prepare
from ondevice_rl.train.sweep.space import (
    LogUniform,
    SweepPlan,
    SweepSpecError,
    Uniform,
    build_plan,
)
from ondevice_rl.train.sweep.strategies import PBT, Halving, Independent

#: Per learner, the search space compared when none is given.
DEFAULT_SPACES = {
    "ppo": {
        "learning_rate": LogUniform(1e-4, 3e-3),
        "ent_coef": LogUniform(1e-4, 1e-1),
        "clip_eps": Uniform(0.1, 0.3),
    },
    "a2c": {
        "learning_rate": LogUniform(1e-4, 3e-3),
        "ent_coef": LogUniform(1e-4, 1e-1),
    },
    "dqn": {"learning_rate": LogUniform(1e-5, 1e-3), "tau": LogUniform(1e-3, 1.0)},
    "pqn": {"learning_rate": LogUniform(1e-5, 1e-3), "q_lambda": Uniform(0.5, 0.95)},
    "sac": {"learning_rate": LogUniform(1e-4, 3e-3), "tau": LogUniform(1e-3, 0.1)},
    "td3": {"learning_rate": LogUniform(1e-4, 3e-3), "tau": LogUniform(1e-3, 0.1)},
}
METHODS = {"random": Independent, "pbt": PBT, "halving": Halving}


def seeded_plan(config: Any, search: dict, members: int, seeds: list[int]):
    """Search seed ``s``: ``members`` draws with ``sample_seed=s``, member
    ``i`` trained from ``fold_in(key(s), i)``; one group per seed, one plan."""
    all_members, swept = [], ()
    for s in seeds:
        plan = build_plan(config, [s], search, samples=members, sample_seed=s)
        swept = plan.swept
        for m in plan.members:
            index = len(all_members)
            all_members.append(m._replace(index=index, setting=index))
    return SweepPlan(config, tuple(all_members), swept, tuple(seeds))


def method_setup(name, config, search, members, seeds, args):
    """``(config, slots, strategy, plan)`` of one method (a one-line
    ``SweepSpecError`` for an unknown method or bad halving settings)."""
    if name not in METHODS:
        raise SweepSpecError(f"unknown method {name!r}; choose from {list(METHODS)}")
    budget = args.halving_budget if name == "halving" else 1.0
    if budget != 1.0 and args.halving_spend == "slots":
        members = max(2, round(members * budget))  # each the full length
    elif budget != 1.0:
        config = config.replace(total_timesteps=int(config.total_timesteps * budget))
    strategy = (
        Halving(eta=args.eta, min_rounds=args.min_rounds, brackets=args.brackets)
        if name == "halving"
        else METHODS[name]()
    )
    return config, members, strategy, seeded_plan(config, search, members, seeds)


def check_methods(config, search, members, seeds, methods, args) -> None:
    """Every method's search checked, as it would run, before any trains."""
    for name in methods:
        _, _, strategy, plan = method_setup(name, config, search, members, seeds, args)
        prepare(
            plan,
            search,
            strategy,
            round_updates=args.round_updates,
            score_episodes=args.score_episodes,
        )


def run_method(name, config, search, members, seeds, args) -> dict:
    """One method's search over every search seed, and its evaluation."""
    config, members, strategy, plan = method_setup(
        name, config, search, members, seeds, args
    )
    start = time.perf_counter()
    result = search_plan(
        plan,
        search,
        strategy,
        round_updates=args.round_updates,
        score_episodes=args.score_episodes,
        progress=not args.no_progress,
    )
    picks = [result.handed_back()[g] for g in range(len(seeds))]
    returns = evaluate_members(
        result.config, result.params, picks, args.eval_episodes, seeds
    )
    iqm, low, high = stats.interval_estimates({name: returns})[name]
    return {
        "method": name,
        "env_steps": result.env_steps,
        "total_timesteps_per_member": config.total_timesteps,
        "slots": members,
        "eval_returns": returns.tolist(),
        "iqm": iqm,
        "ci": [low, high],
        "training_scores": [
            None if p is None else float(result.final_scores()[p]) for p in picks
        ],
        "handed_back_hp": [
            None if p is None else {k: float(v[p]) for k, v in result.hp.items()}
            for p in picks
        ],
        "step_share": result.steps_share,
        "rounds_s": float(sum(result.round_seconds)),
        "steps_s": float(sum(result.step_seconds)),
        "seconds": time.perf_counter() - start,
        "programs_compiled": result.programs_compiled,
    }


def parse_space(items: list[str]) -> dict:
    """``name=loguniform:LOW:HIGH`` (or ``uniform:``, or a comma list)."""
    from ondevice_rl.train.cli.sweep_specs import parse_spec

    space = {}
    for item in items:
        name, _, text = item.partition("=")
        space[name.strip()] = parse_spec(f"--search {name}", text, float)
    return space


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m ondevice_rl.train.sweep.compare",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("--algo", help="(default: the recipe's, or ppo)")
    parser.add_argument("--env", help="(default: the recipe's, or Acrobot-v1)")
    parser.add_argument("--recipe", help="a recipe's settings as the base config")
    parser.add_argument("--total-timesteps", type=int, default=200_000)
    parser.add_argument(
        "--set", action="append", default=[], metavar="FIELD=VALUE",
        help="a static config field (repeatable), e.g. num_envs=8",
    )  # fmt: skip
    parser.add_argument(
        "--search", action="append", default=[], metavar="NAME=SPEC",
        help="the space (repeatable); default the learner's DEFAULT_SPACES",
    )  # fmt: skip
    parser.add_argument("--members", type=int, default=16, help="N per search seed")
    parser.add_argument("--search-seeds", type=int, default=5)
    parser.add_argument(
        "--first-seed", type=int, default=0,
        help="search seeds FIRST .. FIRST + search seeds - 1",
    )  # fmt: skip
    parser.add_argument("--methods", default="random,pbt,halving")
    parser.add_argument("--halving-budget", type=float, default=0.5)
    parser.add_argument(
        "--halving-spend", choices=("length", "slots"), default="length",
        help="halving's budget as shorter slots (length) or fewer full-length "
        "slots (slots)",
    )  # fmt: skip
    parser.add_argument("--eta", type=int, default=2, help="halving's eta")
    parser.add_argument(
        "--min-rounds", type=int, default=1, help="halving's first rung (rounds)"
    )
    parser.add_argument("--brackets", type=int, default=1, help="halving's brackets")
    parser.add_argument("--round-updates", type=int)
    parser.add_argument("--score-episodes", type=int, default=20)
    parser.add_argument("--eval-episodes", type=int, default=32)
    parser.add_argument("--out", type=Path, default=Path("runs/compare"))
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument(
        "--merge", nargs="+", type=Path, metavar="DIR",
        help="train nothing: join earlier comparisons of the same task on "
        "disjoint search seeds (their compare.json) into --out",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.first_seed < 0 or args.search_seeds < 1:
        parser.error("--first-seed must be >= 0 and --search-seeds >= 1")
    return args


def base_config(args) -> Any:
    from ondevice_rl.train.recipes.loader import (
        config_from_dict,
        load_recipe,
        recipe_algorithm,
    )

    if args.algo is None:
        args.algo = recipe_algorithm(args.recipe) if args.recipe else "ppo"
    algorithm = get_algorithm(args.algo)
    values = load_recipe(args.recipe).to_dict() if args.recipe else {}
    env = args.env or values.get("env") or "Acrobot-v1"
    values.update(env=env, total_timesteps=args.total_timesteps)
    for item in args.set:
        name, _, text = item.partition("=")
        values[name] = json.loads(text) if text[:1] in "[0123456789-" else text
    return config_from_dict(values, algorithm, where="--set")


def compare(args: argparse.Namespace) -> dict:
    """Runs every method; writes and returns the record."""
    config = base_config(args)
    search = parse_space(args.search) if args.search else DEFAULT_SPACES[args.algo]
    seeds = list(range(args.first_seed, args.first_seed + args.search_seeds))
    methods = [m.strip() for m in args.methods.split(",")]
    check_methods(config, search, args.members, seeds, methods, args)
    rows = [run_method(m, config, search, args.members, seeds, args) for m in methods]
    record = {
        "machine": machine(),
        "algo": args.algo,
        "env": config.env,
        "config": config.to_dict(),
        "search": {k: repr(v) for k, v in search.items()},
        "members": args.members,
        "search_seeds": seeds,
        "eval_episodes": args.eval_episodes,
        "halving": {
            "budget": args.halving_budget,
            "spend": args.halving_spend,
            "eta": args.eta,
            "min_rounds": args.min_rounds,
            "brackets": args.brackets,
        },
        "methods": with_differences(rows),
    }
    write_files(record, args.out)
    return record


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.merge:
        records = [json.loads((d / "compare.json").read_text()) for d in args.merge]
        record = merge_records(records)
        write_files(record, args.out)
        print(table(record), end="")
        return 0
    try:
        record = compare(args)
    except SweepSpecError as e:
        print(f"compare: {e}", file=sys.stderr)
        return 2
    print(table(record), end="")
    print(f"files in {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
