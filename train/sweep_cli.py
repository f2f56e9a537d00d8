"""Placeholder: subcommands are being written."""


def add_subcommands(subparsers) -> None:
    pass
