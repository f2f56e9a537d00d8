"""Argument helpers shared by every ``ondevice-rl`` subcommand.

* ``parse_int``: integers also written ``500_000`` or ``5e5`` (the one parser
  of integer flags and list items);
* ``chosen_algorithm``: which learner's flags to build (``--algo``, else a
  recipe's ``algo`` key, else PPO), read before the full parser exists;
* ``add_config_flags``: one flag per field of that learner's config;
* ``one_line_errors``: bad flags give one line and exit status 2;
* ``--cpu-devices`` and the multi-host flags.
"""

import argparse
import dataclasses
import json
from pathlib import Path

from ondevice_rl.devices.distributed import (
    AUTO,
    ENV_COORDINATOR,
    ENV_NUM_PROCESSES,
    ENV_PROCESS_ID,
)
from ondevice_rl.train.kit.registry import DEFAULT, algorithms
from ondevice_rl.train.recipes.loader import recipe_algorithm
from ondevice_rl.train.run.artifacts import CONFIG_FILE


def parse_int(text: str) -> int:
    """An int, also written ``500_000`` or ``5e5``; ValueError otherwise."""
    text = str(text).strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value.is_integer():
        raise ValueError(f"not an integer: {text!r}")
    return int(value)


def int_arg(text: str) -> int:
    """``parse_int`` for argparse ``type=``."""
    try:
        return parse_int(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def positive_int_arg(text: str) -> int:
    value = int_arg(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"not a positive integer: {text!r}")
    return value


def int_list_arg(text: str) -> tuple[int, ...]:
    """``"64,64"`` or ``"64 64"`` -> ``(64, 64)``."""
    items = [x for x in text.replace(",", " ").split() if x]
    if not items:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}")
    return tuple(int_arg(x) for x in items)


def positive_int_list_arg(text: str) -> tuple[int, ...]:
    return tuple(positive_int_arg(x) for x in int_list_arg(text))


def names_arg(text: str) -> tuple[str, ...]:
    """``"a,b c"`` -> ``("a", "b", "c")``: a list of names, commas or spaces."""
    return tuple(text.replace(",", " ").split())


def flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def chosen_algorithm(argv: list[str]) -> str:
    """The learner a command line asks for: ``--algo``, else the ``algo`` of
    ``--recipe``, else the default. Unknown names come back as given (the full
    parse reports them)."""
    peek = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    peek.add_argument("--algo")
    peek.add_argument("--recipe")
    peek.add_argument("--resume", nargs="?")  # a run dir (train), a flag (sweep)
    try:
        known, _ = peek.parse_known_args(argv)
    except (argparse.ArgumentError, SystemExit):
        return DEFAULT  # the full parse reports the problem
    if known.algo is not None:
        return known.algo
    if known.resume is not None:
        try:
            info = json.loads((Path(known.resume) / CONFIG_FILE).read_text())
            return str(info.get("algo", DEFAULT))
        except (OSError, ValueError, AttributeError):
            return DEFAULT  # the run's own checks name what is wrong
    if known.recipe is not None:
        try:
            return recipe_algorithm(known.recipe)
        except (FileNotFoundError, ValueError):
            pass  # reported when the recipe is loaded
    return DEFAULT


def add_algo_argument(parser: argparse.ArgumentParser, algo: str) -> None:
    parser.add_argument(
        "--algo",
        default=algo,
        metavar="NAME",
        help=f"learner: {', '.join(algorithms())} (default: ppo, or the recipe's); "
        "the flags below are this learner's",
    )


def add_config_flags(parser: argparse.ArgumentParser, algorithm) -> None:
    """One flag per field of ``algorithm.config``, default None (= recipe or
    the config's default)."""
    name = algorithm.config.__name__
    group = parser.add_argument_group(
        f"{algorithm.name} configuration (override the recipe; defaults are {name}'s)"
    )
    for field in dataclasses.fields(algorithm.config):
        default = field.default
        kwargs = {"default": None, "dest": field.name}
        if isinstance(default, bool):
            kwargs["action"] = argparse.BooleanOptionalAction
        elif isinstance(default, int):
            kwargs.update(type=int_arg, metavar="N")
        elif isinstance(default, float):
            kwargs.update(type=float, metavar="X")
        elif isinstance(default, tuple):
            kwargs.update(type=int_list_arg, metavar="N,N")
        else:
            kwargs.update(type=str, metavar=field.name.upper())
        shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
        meaning = field.metadata.get("help")  # traced hyperparameters have one
        help_text = f"{meaning}; traced (default: {shown})" if meaning else None
        help_text = help_text or f"(default: {shown})"
        group.add_argument(flag_name(field.name), help=help_text, **kwargs)


def member_arg(parser) -> None:
    parser.add_argument(
        "--member",
        metavar="N|best",
        help="RUN_DIR is a sweep: use member N's final parameters (sweep.csv's "
        "member), or the best member's",
    )


def parse_member(args):
    """``--member`` as load_run takes it (a number or "best")."""
    text = args.member
    if text is None:
        return None
    if text.strip().isdigit():
        return int(text)
    if text.strip() == "best":
        return "best"
    raise ValueError(f"--member must be a member's number or 'best', got {text!r}")


def check_out_file(out: Path) -> None:
    """ValueError (one line, naming ``--out``) unless ``out`` can be written:
    not a directory, in a directory that exists, a name the file system
    takes. Checked before anything loads or compiles."""
    try:
        if out.is_dir():
            raise ValueError(f"--out {out} is a directory; name the file")
        parent = out.parent
        if not parent.is_dir():
            why = "is not a directory" if parent.exists() else "does not exist"
            raise ValueError(f"--out {out}: its directory {parent} {why}")
    except OSError as e:  # a name too long, a directory we may not search
        raise ValueError(f"--out {out}: cannot write there ({e.strerror})") from None


def member_file(name: str, member) -> str:
    """``name`` for a run, ``<stem>-member-<member><suffix>`` for a sweep's
    member (``policy.bin`` -> ``policy-member-3.bin``)."""
    if member is None:
        return name
    stem, dot, suffix = name.rpartition(".")
    return f"{stem}-member-{member}{dot}{suffix}"


def one_line_errors(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Bad flags give one line on stderr and exit status 2 (no usage dump)."""

    def error(message: str):
        parser.exit(2, f"{parser.prog}: error: {message}\n")

    parser.error = error
    return parser


def add_cpu_devices_argument(parser: argparse.ArgumentParser, default=None) -> None:
    """``--cpu-devices N`` (``None``: one per core)."""
    parser.add_argument(
        "--cpu-devices",
        type=positive_int_arg,
        default=default,
        metavar="N",
        help="on CPU, split populations over N devices (default: one per core; "
        "1 = a single device)",
    )


def add_distributed_arguments(parser: argparse.ArgumentParser) -> None:
    """``--coordinator``, ``--num-processes``, ``--process-id`` (see
    ``ondevice_rl.devices.distributed.initialize_from_env``)."""
    group = parser.add_argument_group(
        "several hosts",
        "JAX multi-controller runtime; or set the ONDEVICE_RL_* environment variables",
    )
    group.add_argument(
        "--coordinator",
        metavar="HOST:PORT",
        help=f"process 0's address (or '{AUTO}'); env {ENV_COORDINATOR}",
    )
    group.add_argument(
        "--num-processes", type=int_arg, metavar="N", help=f"env {ENV_NUM_PROCESSES}"
    )
    group.add_argument(
        "--process-id", type=int_arg, metavar="I", help=f"0..N-1; env {ENV_PROCESS_ID}"
    )
