"""The ``ondevice-rl`` command line: ``train``, ``algos``, ``envs``,
``recipes``, ``sweep``, ``seeds``, ``bench``, ``eval``, ``render``,
``plot``, ``export``, ``check-env``.

Each subcommand lives in its own module of this package exposing
``add_subcommands(subparsers, algo)``; the chosen subcommand's parser sets
``func`` to the function that runs it. ``algo`` is the learner the command
line asks for (``--algo``, or a recipe's), read first so that the config
flags are that learner's. Errors are printed by ``errors.fail``: one line,
the last on stderr.
"""

import argparse
import sys

import ondevice_rl  # noqa: F401  (sets the XLA CPU flags before JAX starts)
from ondevice_rl.train.cli import (
    bench,
    check_env,
    eval,
    export,
    listing,
    plot,
    seeds,
    sweep,
    train,
)
from ondevice_rl.train.cli.args import chosen_algorithm, one_line_errors


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    algo = chosen_algorithm(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="ondevice-rl",
        description="Reinforcement learning fused into one compiled JAX program.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    commands = (train, listing, sweep, seeds, bench, eval, plot, export, check_env)
    for module in commands:
        module.add_subcommands(subparsers, algo)
    return one_line_errors(parser)  # e.g. unrecognized arguments


def main(argv: list[str] | None = None) -> int:
    parser = build_parser(argv)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # named by the command's own line, as its other errors are
        parser.exit(
            2,
            f"{parser.prog} {args.command}: error: unrecognized arguments: "
            f"{' '.join(w if w.strip() else repr(w) for w in unknown)}\n",
        )
    for word in sys.argv[1:] if argv is None else argv:
        flag, sep, value = word.partition("=")
        if flag.startswith("-") and sep and value == "--":  # argparse drops it
            parser.exit(
                2,
                f"{parser.prog} {args.command}: error: argument {flag}: expected "
                "one argument\n",
            )
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
