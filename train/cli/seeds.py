"""``ondevice-rl seeds RECIPE``: does a recipe's result hold on your seeds?

Examples::

    ondevice-rl seeds cartpole_ppo                      # keys 100..107
    ondevice-rl seeds cartpole_novel_ppo_gru --keys 100..107 --sets 2
    ondevice-rl seeds acrobot_dqn --keys 7,19,23,42 --eval-episodes 32
    ondevice-rl seeds minatar_breakout_ppo --keys 100..103 --checkpoint

Trains the recipe once per seed ``s`` of ``--keys`` (key
``jax.random.key(s)``, as ``train --seed s``; one population, compiled
once) and prints, per set (``--sets`` equal sets, in order) and for all:
the IQM of the final return (the mean ``episode_return`` of the last 10
updates, as every run reports it) with its stratified-bootstrap 95% CI and
the worst seed, as the results table states a recipe. The default keys,
100..107, are ones no shipped recipe was tuned on. Writes
``seed_sets.json``, ``seed_sets.md`` and ``curves.npz`` (every seed's
metrics per update, ``seed_<s>_<metric>``: a failing seed's curve, its
losses) into ``--out`` (default ``runs/seeds/RECIPE``); ``--checkpoint``
trains in rounds checkpointed there, and the same command again resumes.
"""

import sys
from pathlib import Path

import numpy as np

from ondevice_rl.cpu.flags import use_cpu_cores
from ondevice_rl.train.cli.args import add_cpu_devices_argument, positive_int_arg
from ondevice_rl.train.cli.errors import WRITE_FAILED, fail
from ondevice_rl.train.cli.sweep_specs import with_changes
from ondevice_rl.train.kit.config import config_from_dict
from ondevice_rl.train.kit.registry import algorithm_of
from ondevice_rl.train.recipes.loader import load_recipe, recipe_env_params
from ondevice_rl.train.run.artifacts import write_json
from ondevice_rl.train.services.machine import machine
from ondevice_rl.train.services.writes import write_whole
from ondevice_rl.train.sweep import seed_sets

#: Keys no shipped recipe was tuned or stated on.
DEFAULT_KEYS = "100..107"
MAX_SEEDS = 4096


class SeedsError(ValueError):
    pass


def parse_keys(text: str) -> list[int]:
    """``A..B`` (inclusive) or ``a,b,c``: distinct seeds in 0..2**31-1."""
    text = text.strip()
    try:
        if ".." in text:
            low, high = (int(x) for x in text.split(".."))
            seeds = list(range(low, high + 1))
        else:
            seeds = [int(x) for x in text.split(",")]
    except ValueError:
        raise SeedsError(f"--keys {text!r}: write A..B or a,b,c (integers)") from None
    if not seeds or len(seeds) > MAX_SEEDS:
        raise SeedsError(f"--keys {text!r}: give 1 to {MAX_SEEDS} seeds")
    if min(seeds) < 0 or max(seeds) >= 2**31:
        raise SeedsError(f"--keys {text!r}: seeds are 0 to {2**31 - 1}")
    if len(set(seeds)) != len(seeds):
        raise SeedsError(f"--keys {text!r}: a seed is given twice")
    return seeds


def check_out(out: Path) -> None:
    """``SeedsError`` unless ``out`` is, or can become, a directory."""
    try:
        if out.exists() and not out.is_dir():
            raise SeedsError(f"--out {out} is a file, not a directory")
        above = next(p for p in out.absolute().parents if p.exists())
        if not above.is_dir():
            raise SeedsError(f"--out {out}: {above} is not a directory")
    except OSError as e:  # a name too long, a directory we may not search
        raise SeedsError(f"--out {out}: cannot write there ({e.strerror})") from None


def add_subcommands(subparsers, algo: str | None = None) -> None:
    parser = subparsers.add_parser(
        "seeds",
        help="a recipe's final return over seeds of your choosing (IQM, CI)",
        description=__doc__.split("\n\n")[0].split(": ", 1)[1],
        epilog="Example: ondevice-rl seeds cartpole_ppo --keys 100..107",
    )
    parser.add_argument("recipe", help="a shipped recipe (ondevice-rl recipes)")
    parser.add_argument(
        "--keys",
        default=DEFAULT_KEYS,
        metavar="A..B|a,b,c",
        help=f"the seeds; key jax.random.key(s) each (default {DEFAULT_KEYS})",
    )
    parser.add_argument(
        "--sets", type=positive_int_arg, default=1, metavar="N",
        help="split the seeds, in order, into N equal sets (default 1)",
    )  # fmt: skip
    parser.add_argument(
        "--set", action="append", default=[], metavar="FIELD=VALUE",
        help="change a config field (repeatable), e.g. total_timesteps=100000; "
        "the record lists the changes",
    )  # fmt: skip
    parser.add_argument(
        "--eval-episodes", type=int, default=0, metavar="K",
        help="also play K deterministic episodes with each seed's final policy",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, help="default runs/seeds/RECIPE")
    parser.add_argument(
        "--checkpoint", action="store_true",
        help="train in rounds, checkpointed under OUT/search after each; the "
        "same command again resumes from the newest checkpoint",
    )  # fmt: skip
    parser.add_argument(
        "--round-updates", type=positive_int_arg, metavar="K",
        help="with --checkpoint: updates per round (default: about 20 rounds)",
    )  # fmt: skip
    add_cpu_devices_argument(parser)
    parser.add_argument("--no-progress", action="store_true", help="no progress")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    parser.set_defaults(func=_seeds)


def _config(recipe, changes: list[str]):
    """The recipe's config with ``FIELD=VALUE`` changes (JSON values)."""
    values = with_changes(recipe.to_dict(), changes)
    return config_from_dict(values, algorithm_of(recipe), where="--set")


def _seeds(args) -> int:
    try:
        seeds = parse_keys(args.keys)
        if len(seeds) % args.sets:
            raise SeedsError(
                f"--sets {args.sets}: {len(seeds)} seeds do not split into "
                f"{args.sets} equal sets"
            )
        if args.eval_episodes < 0:
            raise SeedsError(f"--eval-episodes must be >= 0, got {args.eval_episodes}")
        if args.round_updates is not None and not args.checkpoint:
            raise SeedsError("--round-updates needs --checkpoint")
        config = _config(load_recipe(args.recipe), args.set)
        env_params = recipe_env_params(args.recipe) or {}
        out = args.out or Path("runs") / "seeds" / args.recipe
        check_out(out)
    except (ValueError, KeyError, OSError) as e:  # OSError: no such recipe
        if args.debug:
            raise
        return fail("seeds", e)
    options = {"progress": not args.no_progress}
    if env_params:  # the recipe's [env_params], one setting
        options["env_params"] = {name: [v] for name, v in env_params.items()}
    if args.checkpoint:
        options["round_updates"] = args.round_updates
    use_cpu_cores(args.cpu_devices)
    curves = {}
    record = seed_sets.measure(
        config,
        seeds,
        args.sets,
        args.eval_episodes,
        out if args.checkpoint else None,
        curves,
        **options,
    )
    if record is None:
        print(
            f"interrupted: run the same command again to resume from {out}",
            file=sys.stderr,
        )
        return 130
    record.update(recipe=args.recipe, keys=args.keys, machine=machine())
    if args.set:  # the record is of the recipe as changed, and says so
        record["changes"] = list(args.set)
    table = seed_sets.table(record)
    try:
        out.mkdir(parents=True, exist_ok=True)
        write_json(out / "seed_sets.json", record)
        write_whole(out / "seed_sets.md", lambda tmp: tmp.write_text(table))
        arrays = {
            f"seed_{seed}_{name}": values
            for seed, metrics in curves.items()
            for name, values in metrics.items()
        }
        write_whole(out / "curves.npz", lambda tmp: np.savez_compressed(tmp, **arrays))
    except OSError as e:
        where = e.filename or out
        return fail("seeds", f"cannot write {where} ({e.strerror})", WRITE_FAILED)
    print(table, end="")
    print(f"wrote seed_sets.json, seed_sets.md, curves.npz into {out}")
    return 0
