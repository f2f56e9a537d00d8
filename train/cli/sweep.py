"""``ondevice-rl sweep``: train a population and rank its settings.

Examples::

    ondevice-rl sweep --env CartPole-v1 --seeds 4 \\
        --learning-rate 1e-4,3e-4,1e-3 --clip-eps 0.1,0.2 --out runs/sweep
    ondevice-rl sweep --learning-rate loguniform:1e-5:1e-2 --samples 64
    ondevice-rl sweep --num-envs 4,8 --env-param length=0.25,0.5,1.0
    ondevice-rl sweep --recipe cartpole_dqn --learning-rate 1e-4,3e-4
    ondevice-rl sweep --strategy pbt --seeds 4 --samples 16 \
        --learning-rate loguniform:1e-5:1e-2 --out runs/pbt
    ondevice-rl sweep compare --recipe acrobot_ppo --total-timesteps 100000

``--algo NAME`` (or ``--recipe NAME``'s learner) picks the learner (default
ppo); its traced hyperparameters and static fields become the flags. A
hyperparameter flag takes a comma list (grid) or ``uniform:LOW:HIGH`` /
``loguniform:LOW:HIGH`` (random, with ``--samples``); static fields
(``--num-envs``, ``--num-steps``, ``--hidden 64x64,256x256``, ...) take comma
lists and compile one program per combination. Writes ``sweep.csv``,
``ranking.csv``, ``curves.npz``, ``curves.png``, ``profile.png``,
``summary.json`` and every member's final parameters into ``--out`` and
prints the ranking; ``--strategy`` searches as it trains
(``sweep_search.py``), and ``sweep compare`` compares the strategies on one
task (``sweep_compare.py``). Bad specs exit 2 with a one-line error; Ctrl-C
writes the members finished so far and exits 130.
"""

import argparse
import sys
from pathlib import Path

from ondevice_rl.cpu.flags import use_cpu_cores
from ondevice_rl.devices import distributed
from ondevice_rl.train.cli import sweep_compare, sweep_search
from ondevice_rl.train.cli.args import (
    add_algo_argument,
    add_cpu_devices_argument,
    add_distributed_arguments,
    flag_name,
    int_arg,
    positive_int_arg,
)
from ondevice_rl.train.cli.errors import WRITE_FAILED, fail
from ondevice_rl.train.cli.sweep_specs import (
    CLIError,
    given_flags,
    interrupted,
    parse_bytes,
    parse_seeds,
    parse_spec,
    resume_conflict,
)
from ondevice_rl.train.kit.protocol import Algorithm
from ondevice_rl.train.kit.registry import DEFAULT, algorithms, get_algorithm
from ondevice_rl.train.recipes.loader import (
    load_recipe,
    recipe_algorithm,
    recipe_env_params,
)
from ondevice_rl.train.run import artifacts
from ondevice_rl.train.run.lock import DirLock
from ondevice_rl.train.sweep import SweepSpecError, request, run_plan, store
from ondevice_rl.train.sweep.report import write_outputs
from ondevice_rl.train.sweep.terminal import print_plan, print_result

DEFAULT_ENV = "CartPole-v1"


def _static_flags(algorithm: Algorithm) -> dict:
    """Static config fields → value kind (``hidden`` is ``"hidden"``)."""
    flags = {}
    defaults = algorithm.defaults()
    for name in algorithm.static_fields:
        default = defaults[name]
        flags[name] = "hidden" if name == "hidden" else type(default)
    return flags


_flag = flag_name


def add_subcommands(subparsers, algo: str = DEFAULT) -> None:
    algorithm = get_algorithm(algo if algo in algorithms() else DEFAULT)
    parser = subparsers.add_parser(
        "sweep",
        help="train a population (vmapped, compiled once per static config); "
        "sweep compare: search strategies compared on one task",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_algo_argument(parser, algo)
    parser.set_defaults(algo=None)  # not given: ppo, or the resumed sweep's
    parser.add_argument("--env", help=f"(default {DEFAULT_ENV}, or the recipe's)")
    parser.add_argument(
        "--recipe",
        help="shipped recipe name or TOML file: its settings are the base config "
        "(flags below sweep over it)",
    )
    parser.add_argument("--seeds", help="count N (seeds 0..N-1) or list (default 1)")
    parser.add_argument("--samples", type=int_arg, help="random draws of the ranges")
    parser.add_argument("--sample-seed", type=int_arg, help="(default 0)")
    hp = parser.add_argument_group(
        "hyperparameters", "comma list, uniform:LOW:HIGH or loguniform:LOW:HIGH"
    )
    for name in algorithm.hyperparam_fields:
        hp.add_argument(_flag(name), metavar="SPEC", dest=f"hp_{name}")
    static = parser.add_argument_group(
        "static fields", "comma lists; each combination compiles one program"
    )
    for name in _static_flags(algorithm):
        static.add_argument(_flag(name), metavar="LIST", dest=f"static_{name}")
    parser.add_argument(
        "--env-param",
        action="append",
        default=[],
        metavar="NAME=SPEC",
        help="env physics values, e.g. length=0.25,0.5,1.0 (repeatable)",
    )
    parser.add_argument(
        "--out",
        default="runs/sweep",
        help="output directory (refused if it holds an earlier sweep, unless "
        "--resume or --force); finished chunks are written as they finish",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the sweep in --out: train only the members still missing "
        "(the stored request is used; a flag that differs from it is refused)",
    )
    parser.add_argument(
        "--force", action="store_true", help="replace an earlier sweep in --out"
    )
    parser.add_argument("--chunk-size", type=int_arg, help="members per compiled call")
    parser.add_argument("--memory-budget", help="bytes per device, e.g. 2G")
    parser.add_argument(
        "--top", type=positive_int_arg, default=10, help="settings to print/plot"
    )
    parser.add_argument("--no-progress", action="store_true")
    sweep_search.add_arguments(parser)
    add_cpu_devices_argument(parser)
    add_distributed_arguments(parser)
    parts = parser.add_subparsers(dest="part", metavar="{compare}")
    sweep_compare.add_parser(parts)
    parser.set_defaults(func=run, part=None)


def _read_args(args, algo: str = DEFAULT) -> dict:
    """Everything that can be checked without JAX (before multi-host init);
    ``algo`` when ``--algo`` is not given."""
    if args.algo is None and args.recipe is not None:
        try:
            algo = recipe_algorithm(args.recipe)
        except (FileNotFoundError, ValueError) as err:
            raise CLIError(f"--recipe: {err}") from None
    try:
        algorithm = get_algorithm(algo if args.algo is None else args.algo)
    except KeyError as err:
        raise CLIError(f"--algo: {err.args[0]}") from None
    search, env_params = {}, {}
    for name in algorithm.hyperparam_fields:
        text = getattr(args, f"hp_{name}")
        if text is not None:
            search[name] = parse_spec(_flag(name), text, float)
    for name, kind in _static_flags(algorithm).items():
        text = getattr(args, f"static_{name}")
        if text is not None:
            search[name] = parse_spec(_flag(name), text, kind)
    for item in args.env_param:
        name, sep, text = item.partition("=")
        if not sep or not name.strip():
            raise CLIError(f"--env-param: expected NAME=SPEC, got {item!r}")
        if name.strip() in env_params:
            raise CLIError(f"--env-param: {name.strip()} given twice")
        env_params[name.strip()] = parse_spec(f"--env-param {name}", text, float)
    if args.recipe is not None:  # the recipe's own env params, unless given
        for name, value in (_recipe_env_params(args.recipe) or {}).items():
            env_params.setdefault(name, [value])
    if args.samples is not None and args.samples < 1:
        raise CLIError(f"--samples: expected >= 1, got {args.samples}")
    if args.chunk_size is not None and args.chunk_size < 1:
        raise CLIError(f"--chunk-size: expected >= 1, got {args.chunk_size}")
    if args.sample_seed is not None and args.sample_seed < 0:
        raise CLIError(f"--sample-seed: expected >= 0, got {args.sample_seed}")
    return {
        "algorithm": algorithm,
        "base": None if args.recipe is None else _recipe_base(args, algorithm),
        "strategy": sweep_search.read_strategy(args),
        "seeds": parse_seeds(args.seeds or "1"),
        "search": search,
        "env_params": env_params,
        "budget": None
        if args.memory_budget is None
        else parse_bytes(args.memory_budget),
    }


def _recipe_env_params(recipe: str) -> dict | None:
    try:
        return recipe_env_params(recipe)
    except (OSError, ValueError) as err:
        raise CLIError(f"--recipe: {err}") from None


def _recipe_base(args, algorithm: Algorithm) -> dict:
    """The recipe's config fields (``--recipe``), for ``--algo``'s learner."""
    try:
        recipe = load_recipe(args.recipe)
    except (FileNotFoundError, ValueError) as err:
        raise CLIError(f"--recipe: {err}") from None
    if type(recipe) is not algorithm.config:
        raise CLIError(
            f"--recipe {args.recipe} is for {type(recipe).__name__}, not "
            f"--algo {algorithm.name}"
        )
    return recipe.to_dict()


def _request(args, spec) -> dict:
    """What ``sweep.json`` stores: enough to rebuild the same plan."""
    base = spec["base"]
    return {
        "algo": spec["algorithm"].name,
        "env": args.env
        if args.env is not None
        else (base or {}).get("env", DEFAULT_ENV),
        "recipe": args.recipe,
        "base": base,
        "strategy": spec["strategy"],
        "round_updates": args.round_updates,
        "score_episodes": args.score_episodes,
        "seeds": spec["seeds"],
        "search": spec["search"],
        "env_params": spec["env_params"],
        "samples": args.samples,
        "sample_seed": args.sample_seed or 0,
        "chunk_size": args.chunk_size,
        "memory_budget": spec["budget"],
        "cpu_devices": args.cpu_devices,
    }


def run(args: argparse.Namespace) -> int:
    out, lock = Path(args.out), None
    try:
        if args.resume and args.force:
            raise CLIError("--resume and --force exclude each other")
        stored = request.load_request(out) if args.resume else None
        spec = _read_args(args, stored["algo"] if stored else DEFAULT)
        if stored is not None:
            conflict = resume_conflict(given_flags(args, spec), stored)
            if conflict:
                raise CLIError(conflict)
        asked = stored or _request(args, spec)
        # Both must come before anything starts the JAX backend.
        use_cpu_cores(asked.get("cpu_devices"))
        distributed.initialize_from_args(args)
        main = distributed.is_main_process()
        plan = request.plan_of(asked)  # checked; nothing written or compiled yet
        if asked.get("strategy"):
            sweep_search.check(asked, plan)
        if main and not args.resume:  # what the lock (a file) would come before
            artifacts.check_run_dir(out, force=args.force)
        if main:  # one writer per directory: the main process
            lock = DirLock(out).acquire()
        if main and not args.resume:
            artifacts.prepare_run_dir(out, force=args.force)
            request.save_request(out, asked)
    except (CLIError, SweepSpecError, ValueError, KeyError) as err:
        if lock is not None:
            lock.release()
        return fail("sweep", err)
    try:
        return _sweep(args, out, asked, plan, main)
    except OSError as err:  # a full disk, a read-only directory
        where = f"{err.filename} " if err.filename else ""
        return fail(
            "sweep",
            f"cannot write {where}({err.strerror}): free space or fix permissions, "
            f"then continue with --resume --out {out}",
            WRITE_FAILED,
        )
    finally:
        if lock is not None:
            lock.release()


def _sweep(args, out: Path, asked: dict, plan, main: bool) -> int:
    """Trains the plan's missing members, writing each chunk as it ends,
    then the report."""
    if asked.get("strategy"):
        return sweep_search.run(args, out, asked, plan, main)

    finished = {}
    if args.resume:  # a damaged chunk file is moved aside (by the main process)
        finished, notes = store.finished_members(out, plan, move=main)
        for note in notes:
            print(note, file=sys.stderr)
    if main:
        print_plan(plan)
        if finished:
            print(
                f"resuming: {len(finished)} member(s) already trained", file=sys.stderr
            )
    written = set(finished)

    def write_chunk(result, group, chunk):
        if main and chunk == 0 and not args.resume:
            request.save_request(out, request.with_chunk_sizes(asked, result.groups))
        new = {
            m.index: result.metrics[m.index]
            for m in result.finished
            if m.index not in written
        }
        if main:  # parameters first: a chunk on disk always has them
            store.save_params(out, result, new)
            store.save_metrics(out, new)
        written.update(new)

    result = run_plan(
        plan,
        chunk_size=asked.get("chunk_size"),
        memory_budget_bytes=asked.get("memory_budget"),
        progress=not args.no_progress,
        on_chunk=write_chunk,
        finished=finished,
        chunk_sizes=request.chunk_sizes(asked, plan) if args.resume else None,
    )
    if main:
        write_outputs(result, out, top=args.top)
        print_result(result, out, top=args.top)
    if result.interrupted:
        kept = f"wrote {len(result.finished)} of {len(plan.members)} members"
        return interrupted(kept, out, result.stop_signal)
    return 0
