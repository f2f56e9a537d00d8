"""The ``ondevice-rl`` command line: ``train``, ``envs``, ``bench``, ``sweep``.

Each subcommand lives in its own module exposing ``add_subcommands(subparsers)``;
the chosen subcommand's parser sets ``func`` to the function that runs it.
"""

import argparse
import sys

import ondevice_rl  # noqa: F401  (sets the XLA CPU flags before JAX starts)


def build_parser() -> argparse.ArgumentParser:
    from ondevice_rl.train import bench, run_cli, sweep_cli

    parser = argparse.ArgumentParser(
        prog="ondevice-rl",
        description="Reinforcement learning fused into one compiled JAX program.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in (run_cli, bench, sweep_cli):
        module.add_subcommands(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
