"""``ondevice-rl bench --suite gpu``: its flags, their checks and its outputs
(the measurements are ``train/bench/gpu_suite.py``'s)."""

import argparse
import json
from pathlib import Path

from ondevice_rl import envs
from ondevice_rl.nn.precision import DEFAULT_MATMUL_PRECISION, MATMUL_PRECISIONS
from ondevice_rl.train.bench import env_speed, gpu_report, gpu_suite, train_speed
from ondevice_rl.train.bench.train_speed import BenchError
from ondevice_rl.train.cli.args import names_arg
from ondevice_rl.train.kit.registry import algorithms

SUITES = ("gpu",)


def add_suite_flags(parser: argparse.ArgumentParser, suppress: bool) -> None:
    """``--suite``, ``--algos``, ``--references`` and ``--matmul-precision``
    (the last also for ``bench train``)."""

    def default(value):
        return argparse.SUPPRESS if suppress else value

    group = parser.add_argument_group("suite")
    group.add_argument(
        "--suite",
        choices=SUITES,
        default=default(None),
        help="gpu: env stepping to 2^16 envs, every learner at 1/16/256/2048 "
        "seeds (with references), the population scaling curve, compile "
        "times, device, driver and versions, in one bench.json, bench.png and "
        "table (--envs, --batch-sizes, --seeds, --timesteps, --repeat, "
        "--quick change its sizes)",
    )
    group.add_argument(
        "--algos",
        type=names_arg,
        metavar="NAMES",
        default=default(None),
        help=f"the suite's learners (default: all: {', '.join(algorithms())})",
    )
    group.add_argument(
        "--references",
        type=Path,
        metavar="DIR",
        default=default(None),
        help="a directory of reference scripts, reference_<learner>.py (as "
        "--reference takes), run beside the suite's learners",
    )
    group.add_argument(
        "--matmul-precision",
        choices=MATMUL_PRECISIONS,
        default=default(DEFAULT_MATMUL_PRECISION),
        help="matmul precision of the timed programs (and of the references' "
        f"JAX); default {DEFAULT_MATMUL_PRECISION}: float32 everywhere",
    )


def _sizes(args) -> dict:
    """The suite's sizes from the flags; BenchError (one line) if unusable."""
    if args.part is not None:
        raise BenchError(f"--suite {args.suite} runs on its own, without a part")
    learners = args.algos or algorithms()
    unknown = [name for name in learners if name not in algorithms()]
    if unknown:
        raise BenchError(
            f"--algos: unknown learner(s) {', '.join(unknown)}; "
            f"known: {', '.join(algorithms())}"
        )
    unknown = [name for name in args.envs or () if name not in envs.names()]
    if unknown:
        raise BenchError(f"--envs: unknown environment(s) {', '.join(unknown)}")
    if args.references is not None and not args.references.is_dir():
        raise BenchError(f"--references: no such directory: {args.references}")
    quick = args.quick
    table = gpu_suite.QUICK_TIMESTEPS if quick else gpu_suite.TIMESTEPS
    timesteps = {name: args.timesteps or table[name] for name in learners}
    for name, steps in timesteps.items():
        try:
            train_speed.bench_config(steps, algo=name)
        except ValueError as e:
            raise BenchError(f"--timesteps: {e}") from None
    return dict(
        envs=args.envs or gpu_suite.default_envs(),
        batches=args.batch_sizes
        or (env_speed.QUICK_BATCHES if quick else gpu_suite.BATCHES),
        learners=tuple(learners),
        seed_counts=args.seeds
        or (train_speed.QUICK_SEEDS if quick else gpu_suite.SEEDS),
        timesteps=timesteps,
        reference_dir=args.references,
        precision=args.matmul_precision,
        repeat=args.repeat,
    )


def make_out_dir(out: Path) -> None:
    """``--out``, made if missing; BenchError (one line) if it cannot be."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise BenchError(f"--out {out} is a file, not a directory") from None
    except OSError as e:
        raise BenchError(f"--out {out}: cannot make it ({e.strerror})") from None


def run_suite(args, meta: dict, log) -> int:
    """Runs the suite; tables to stdout, files to ``--out``."""
    sizes = _sizes(args)
    make_out_dir(args.out)
    results = gpu_suite.run_gpu_suite(dict(meta=meta), args.out, log=log, **sizes)
    gpu_report.print_suite(results)
    gpu_report.plot_suite(results, args.out / "bench.png")
    log(f"wrote {args.out / 'bench.json'} and {args.out / 'bench.png'}")
    if args.json:
        print(json.dumps(results, default=float), flush=True)
    return 0
