"""Placeholder: ``ondevice-rl bench`` is being written."""


def add_subcommands(subparsers) -> None:
    pass
