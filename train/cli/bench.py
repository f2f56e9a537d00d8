"""Arguments and orchestration of ``ondevice-rl bench [env|train|host]``.

Every flag is accepted by ``bench`` and by each part (a flag a part does not
use is ignored); without a part, all three run; ``--suite gpu`` runs the
suite instead (``train/cli/bench_suite.py``). Progress goes to stderr;
tables, then (``--json``) one JSON line, to stdout; ``bench.json`` and
``bench.png`` to ``--out``.
"""

import argparse
import json
import os
import platform
import sys
from pathlib import Path

import jax

from ondevice_rl import envs
from ondevice_rl.cpu.flags import use_cpu_cores
from ondevice_rl.train.bench import env_speed, host, report, train_speed
from ondevice_rl.train.bench.host.report import print_host
from ondevice_rl.train.bench.suite_speed import SUITE_BATCHES
from ondevice_rl.train.bench.train_speed import BenchError
from ondevice_rl.train.cli import bench_host, bench_launches
from ondevice_rl.train.cli.args import (
    add_cpu_devices_argument,
    names_arg,
    positive_int_arg,
    positive_int_list_arg,
)
from ondevice_rl.train.cli.bench_suite import add_suite_flags, make_out_dir, run_suite
from ondevice_rl.train.kit.registry import (
    DEFAULT,
    algorithms,
    get_algorithm,
    trainer_for,
)
from ondevice_rl.train.recipes.loader import load_recipe, recipe_algorithm
from ondevice_rl.train.services.machine import machine

PARTS = ("env", "train", "host")
_count, _counts = positive_int_arg, positive_int_list_arg


def _add_flags(parser: argparse.ArgumentParser, suppress: bool) -> None:
    """All flags; a part's parser suppresses defaults so that values given
    before the part name (``bench --quick train``) survive."""

    def add(*names, default=None, **kwargs):
        kwargs["default"] = argparse.SUPPRESS if suppress else default
        parser.add_argument(*names, **kwargs)

    add(
        "--quick",
        action="store_true",
        default=False,
        help="small sizes (the whole bench runs in about a minute on 2 CPU cores)",
    )
    add(
        "--out",
        type=Path,
        default=Path("."),
        metavar="DIR",
        help="where bench.json and bench.png go (default: .)",
    )
    add(
        "--json",
        action="store_true",
        default=False,
        help="print the results as one JSON object, the last line of stdout",
    )
    add_cpu_devices_argument(parser, argparse.SUPPRESS if suppress else None)
    add_suite_flags(parser, suppress)
    group = parser.add_argument_group("env")
    group.add_argument(
        "--envs",
        type=names_arg,
        default=argparse.SUPPRESS if suppress else None,
        metavar="NAMES",
        help="registered env names (default: our ports, gymnax adapters, "
        "brax and one env per JAX suite if installed)",
    )
    group.add_argument(
        "--batch-sizes",
        type=_counts,
        metavar="B,..",
        default=argparse.SUPPRESS if suppress else None,
        help=f"default {env_speed.DEFAULT_BATCHES}, quick {env_speed.QUICK_BATCHES}",
    )
    group.add_argument(
        "--compare",
        action=argparse.BooleanOptionalAction,
        default=argparse.SUPPRESS if suppress else None,
        help="also gymnax's own CartPole and gymnasium's vector env, and each "
        "JAX suite's own auto-resetting step (default: on when all parts run)",
    )
    group = parser.add_argument_group("train")
    group.add_argument(
        "--algo",
        metavar="NAME",
        default=argparse.SUPPRESS if suppress else DEFAULT,
        help=f"learner to time: {', '.join(algorithms())} (default: ppo; each "
        "with its config's defaults)",
    )
    group.add_argument(
        "--recipe",
        metavar="NAME",
        default=argparse.SUPPRESS if suppress else None,
        help="time a recipe's config instead (its learner, env and settings; "
        "--timesteps still sets the steps per seed)",
    )
    group.add_argument(
        "--seeds",
        type=_counts,
        metavar="N,..",
        default=argparse.SUPPRESS if suppress else None,
        help=f"seed counts (vmap); default {train_speed.DEFAULT_SEEDS}"
        f", quick {train_speed.QUICK_SEEDS}",
    )
    group.add_argument(
        "--timesteps",
        type=_count,
        metavar="T",
        default=argparse.SUPPRESS if suppress else None,
        help=f"env steps per seed; default "
        f"{train_speed.DEFAULT_TIMESTEPS:g}, quick "
        f"{train_speed.QUICK_TIMESTEPS} ",
    )
    group.add_argument(
        "--reference",
        type=Path,
        metavar="PATH",
        default=argparse.SUPPRESS if suppress else None,
        help="also run this reference script with the same settings: it takes "
        "--seeds and --timesteps and prints one JSON line with seeds, timesteps, "
        "compile_s, run_s, sps and final_return",
    )
    group.add_argument(
        "--repeat",
        type=_count,
        metavar="N",
        default=argparse.SUPPRESS if suppress else 1,
        help="runs of each side, interleaved ours/ref; best kept",
    )
    group = parser.add_argument_group("host")
    group.add_argument(
        "--host-timesteps",
        type=_count,
        metavar="T",
        default=argparse.SUPPRESS if suppress else None,
        help=f"host-loop env steps; default "
        f"{host.DEFAULT_TIMESTEPS:g}, quick "
        f"{host.QUICK_TIMESTEPS} (bench host has its own flags)",
    )


def add_subcommands(subparsers, algo: str = DEFAULT) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="benchmarks: env stepping, training, host loop vs fused",
        description="Benchmarks of env stepping, training and the host-loop "
        "vs fused experiment. Without a part, runs all three. Tables go to "
        "stdout, bench.json and bench.png to --out.",
    )
    _add_flags(parser, suppress=False)
    parts = parser.add_subparsers(dest="part", metavar="{env,train,host,launches}")
    helps = dict(
        env="random-policy steps/s of each env at several batch sizes",
        train="training SPS and compile time at several seed counts (vs --reference)",
    )
    for part in ("env", "train"):
        _add_flags(parts.add_parser(part, help=helps[part]), suppress=True)
    bench_host.add_parser(parts)
    bench_launches.add_parser(parts)
    parser.set_defaults(func=run, part=None)


def _log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def _meta(args) -> dict:
    return dict(
        **machine(),
        machine=platform.machine(),
        xla_flags=os.environ.get("XLA_FLAGS", ""),
        matmul_precision=args.matmul_precision,
        quick=args.quick,
        argv=sys.argv[1:],
    )


def _check_envs(names: tuple[str, ...]) -> None:
    unknown = [n for n in names if n not in envs.names()]
    if unknown:
        raise BenchError(
            f"--envs: unknown environment(s) {', '.join(unknown)}; "
            f"see `ondevice-rl envs`"
        )


def run(args) -> int:
    try:
        return _run(args)
    except BenchError as e:
        print(f"ondevice-rl bench: error: {e}", file=sys.stderr)
        return 2


def _run(args) -> int:
    try:
        use_cpu_cores(args.cpu_devices)
    except ValueError as e:
        raise BenchError(f"--cpu-devices: {e}") from e
    # Compile times must be real compiles, not persistent-cache hits.
    jax.config.update("jax_enable_compilation_cache", False)
    if args.suite is not None:
        return run_suite(args, _meta(args), _log)
    parts = PARTS if args.part is None else (args.part,)
    quick = args.quick
    timesteps = args.timesteps or (
        train_speed.QUICK_TIMESTEPS if quick else train_speed.DEFAULT_TIMESTEPS
    )
    recipe = getattr(args, "recipe", None)
    try:
        if recipe is not None:
            algorithm = get_algorithm(recipe_algorithm(recipe))
            load_recipe(recipe)  # its keys and values, before --timesteps
        else:
            algorithm = get_algorithm(args.algo)
    except (FileNotFoundError, ValueError) as e:
        raise BenchError(f"--recipe: {e}") from None
    except KeyError as e:
        raise BenchError(f"--algo: {e.args[0]}") from None
    try:
        config = train_speed.bench_config(timesteps, algo=algorithm.name, recipe=recipe)
    except ValueError as e:
        raise BenchError(f"--timesteps: {e}") from None
    try:
        trainer_for(config)  # an env the learner can act in (a recipe's)
    except (KeyError, ValueError) as e:
        message = e.args[0] if e.args else e
        raise BenchError(
            f"--recipe {recipe}: {message}" if recipe else message
        ) from None
    host_steps = args.host_timesteps or (
        host.QUICK_TIMESTEPS if quick else host.DEFAULT_TIMESTEPS
    )
    if "host" in parts:
        try:
            algorithm.config(total_timesteps=host_steps)
        except ValueError as e:
            raise BenchError(f"--host-timesteps: {e}") from None
    names = args.envs or env_speed.default_envs(quick)
    _check_envs(names)
    if args.reference is not None and not args.reference.is_file():
        raise BenchError(f"--reference: no such file: {args.reference}")
    make_out_dir(args.out)

    results = dict(meta=_meta(args))
    if "env" in parts:
        batches = args.batch_sizes or (
            env_speed.QUICK_BATCHES if quick else env_speed.DEFAULT_BATCHES
        )
        compare = args.compare
        if compare is None:  # on in a full ``bench``; off in parts and --quick
            compare = args.part is None and not quick
        # The JAX suites at 1 … 4096 envs unless --batch-sizes says otherwise.
        suite_batches = None if args.batch_sizes or quick else SUITE_BATCHES
        out_json = args.out / "bench.json"

        def measured(rows):  # an interrupted bench keeps what it measured
            report.write_json(dict(results, env=dict(results=rows)), out_json)

        results["env"] = env_speed.run_env_bench(
            names, batches, compare, quick, _log, suite_batches, measured
        )
    if "train" in parts:
        seeds = args.seeds or (
            train_speed.QUICK_SEEDS if quick else train_speed.DEFAULT_SEEDS
        )
        # A reference's matmuls at our precision (its JAX reads it from here).
        os.environ["JAX_DEFAULT_MATMUL_PRECISION"] = args.matmul_precision
        fields = dict(matmul_precision=args.matmul_precision)
        results["train"] = train_speed.run_train_bench(
            seeds, timesteps, args.reference, args.repeat, _log, algorithm.name,
            recipe, fields,
        )  # fmt: skip
    if "host" in parts:  # the short form; ``bench host`` has the rest
        results["host"] = host.run_host_bench(
            host.DEFAULT_ENVS, ("gym-sync", "fused"), algo=algorithm.name,
            num_envs=algorithm.config().num_envs, timesteps=host_steps, log=_log,
        )  # fmt: skip

    report.print_tables(results)
    if "host" in results:
        print_host(results["host"])
    report.write_json(results, args.out / "bench.json")
    report.plot(results, args.out / "bench.png")
    _log(f"wrote {args.out / 'bench.json'} and {args.out / 'bench.png'}")
    if args.json:
        summary = results[args.part] if args.part else results
        print(json.dumps(summary, default=float), flush=True)
    return 0
