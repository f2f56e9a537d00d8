"""Arguments of ``ondevice-rl bench launches``: its own flags only."""

import json
import sys
from pathlib import Path

from ondevice_rl.train.bench import launches
from ondevice_rl.train.cli.args import positive_int_list_arg
from ondevice_rl.train.kit.registry import trainer_for
from ondevice_rl.train.recipes.loader import load_recipe, recipe_algorithm


def add_parser(parts) -> None:
    """``bench launches`` under ``bench``'s parts."""
    parser = parts.add_parser(
        "launches",
        help="count what each update launches on an NVIDIA GPU, without a GPU",
        description="Compile a learner's whole run for an NVIDIA GPU target on "
        "this machine (no GPU needed) and count, per update: device work items "
        "(kernels and memcpys) by kind, CUDA-graph launches and launches outside "
        "graphs, and the same per loop, beside a reference compiled the same way. "
        "JAX's CUDA plugin is installed on first use into a cache directory of "
        "its own ($ONDEVICE_RL_CUDA_PLUGIN_DIR), never into this environment.",
    )
    what = parser.add_mutually_exclusive_group()
    what.add_argument(
        "--algo",
        metavar="NAMES",
        help="learners, comma-separated, each with its default config: "
        f"{', '.join(launches.PROGRAMS)} (ppo-gru: the cartpole_novel_ppo_gru "
        "recipe) or 'all' (default: ppo)",
    )
    what.add_argument("--recipe", metavar="NAME", help="a recipe's config instead")
    parser.add_argument(
        "--seeds",
        type=positive_int_list_arg,
        default=(1,),
        metavar="N,..",
        help="seed counts, each one program vmapped over the seeds (default: 1)",
    )
    parser.add_argument(
        "--target",
        default="h100",
        metavar="NAME|FILE",
        help=f"GPU target: {', '.join(launches.targets())} or a GpuTargetConfig "
        "text proto (default: h100)",
    )
    parser.add_argument(
        "--reference",
        default="auto",
        metavar="auto|none|PATH",
        help="beside each program: its shipped reference (auto: ppo, dqn, sac, "
        "ppo-gru have one), none, or a script with make_train(timesteps) -> "
        "train(key) and num_updates(timesteps)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="also print the results as one JSON line, the last on stdout",
    )
    parser.set_defaults(func=run, part="launches")


def _programs(args) -> list[tuple[str, str, str | None]]:
    if args.recipe is not None:
        try:
            algo = recipe_algorithm(args.recipe)
            config = load_recipe(args.recipe)  # its keys and values
        except (FileNotFoundError, ValueError) as e:
            raise launches.LaunchesError(f"--recipe: {e}") from None
        try:
            trainer_for(config)  # an env its learner can act in
        except (KeyError, ValueError) as e:
            message = e.args[0] if e.args else e
            raise launches.LaunchesError(f"--recipe {args.recipe}: {message}") from None
        return [(args.recipe, algo, args.recipe)]
    names = ("ppo" if args.algo is None else args.algo).replace(",", " ").split()
    if names == ["all"]:
        names = list(launches.PROGRAMS)
    unknown = [n for n in names if n not in launches.PROGRAMS]
    if unknown or not names:
        raise launches.LaunchesError(
            f"--algo: unknown learner(s) {', '.join(unknown) or '(none)'}; "
            f"choose from {', '.join(launches.PROGRAMS)} or all"
        )
    return [(n, *launches.PROGRAMS[n]) for n in names]


def _log(message: str) -> None:
    print(f"[bench launches] {message}", file=sys.stderr, flush=True)


def run(args) -> int:
    try:
        programs = _programs(args)
        target = launches.target_file(args.target)
        reference = args.reference
        if reference not in ("auto", "none") and not reference.endswith(".py"):
            raise launches.LaunchesError(
                f"--reference: expected auto, none or a .py file, got {reference!r}"
            )
        if reference.endswith(".py"):
            if not Path(reference).is_file():
                raise launches.LaunchesError(f"--reference: no such file: {reference}")
            reference = str(Path(reference).resolve())
        rows = launches.run_launches(
            programs, list(args.seeds), target, reference, _log
        )
    except launches.LaunchesError as e:
        print(f"ondevice-rl bench launches: error: {e}", file=sys.stderr)
        return 2
    print(launches.format_table(rows), flush=True)
    if args.json:
        print(json.dumps(rows), flush=True)
    return 0
