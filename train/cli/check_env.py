"""``ondevice-rl check-env NAME_OR_ENTRY``: the protocol checks for any
environment, with a report.

NAME_OR_ENTRY is a registered name or ``package.module:factory``. The checks
are ``ondevice_rl.checks.check_env.check_env``'s (those the project runs on
its own environments, in its order: static, the compiled rollout, params
sets, op by op): one line each, pass or fail, then the steps/s of the
compiled rollout. ``--reference`` adds the comparison with a gymnasium
environment (spaces, resets, then step by step): a gymnasium id, or
``package.module:function`` returning one (wrapped as the port's observations
need); ``--sync module:function`` sets it to the port's state (the
classic-control ports have theirs built in).

Exit status: 0 all passed, 1 a check failed, 2 nothing to check (an unknown
name, a module that cannot be imported, a factory returning no environment).
"""

import sys

from ondevice_rl import envs
from ondevice_rl.checks import check_env as env_checks
from ondevice_rl.envs.entry import import_entry, is_entry_string
from ondevice_rl.envs.gymnasium_sync import SYNC_FUNCTIONS
from ondevice_rl.ranges import MAX_INT
from ondevice_rl.train.cli.args import int_arg, one_line_errors, positive_int_arg


def add_subcommands(subparsers, algo: str | None = None) -> None:
    del algo
    parser = subparsers.add_parser(
        "check-env",
        help="check an environment of your own (or ours) against the protocol",
        description="Check an environment: declared spaces, shapes and dtypes, "
        "jit and vmap, no reset inside step, time limits, finite values, "
        "determinism, steps/s; optionally step by step against gymnasium. "
        "Exit 1 if a check fails.",
    )
    parser.add_argument(
        "env", metavar="NAME_OR_ENTRY", help="registered name or package.module:factory"
    )
    parser.add_argument(
        "--reference",
        metavar="ID_OR_ENTRY",
        help="gymnasium id (or package.module:function returning a gymnasium env) "
        "to compare with, step by step",
    )
    parser.add_argument(
        "--sync",
        metavar="MODULE:FUNCTION",
        help="sync_state(reference_env, state): sets the reference to the port's "
        "state and returns its observation (built in for the classic-control ids)",
    )
    parser.add_argument(
        "--num-envs",
        type=positive_int_arg,
        default=64,
        metavar="B",
        help="environments in the rollout (default 64)",
    )
    parser.add_argument(
        "--num-steps",
        type=positive_int_arg,
        default=64,
        metavar="T",
        help="steps per environment (default 64)",
    )
    parser.add_argument(
        "--reference-steps",
        type=positive_int_arg,
        default=2000,
        metavar="N",
        help="steps compared with the reference (default 2000)",
    )
    parser.add_argument(
        "--seed", type=int_arg, default=0, help="PRNG seed in [0, 2^32) (default 0)"
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help="a traceback, not one line, when the environment cannot be made",
    )
    parser.set_defaults(func=run)
    one_line_errors(parser)


def _error(message: object) -> int:
    if isinstance(message, KeyError) and message.args:
        message = message.args[0]
    print(f"ondevice-rl check-env: error: {message}", file=sys.stderr)
    return 2


def _reference(args):
    """``(reference env or None, sync function or None)`` (ValueError, one
    line, for what cannot be had)."""
    if args.reference is None:
        if args.sync is not None:
            raise ValueError("--sync needs --reference")
        return None, None
    sync = None
    if args.sync is not None:
        try:
            sync = import_entry(args.sync)
        except ValueError as e:
            raise ValueError(f"--sync: {e}") from None
        if not callable(sync):
            raise ValueError(f"--sync {args.sync} is not a function")
    elif args.reference in SYNC_FUNCTIONS:
        sync = SYNC_FUNCTIONS[args.reference]
    else:
        raise ValueError(
            f"--reference {args.reference} needs --sync module:function (built in "
            f"only for {', '.join(SYNC_FUNCTIONS)})"
        )
    if is_entry_string(args.reference):
        try:
            factory = import_entry(args.reference)
        except ValueError as e:
            raise ValueError(f"--reference: {e}") from None
        try:
            reference = factory()
        except Exception as e:
            raise ValueError(f"--reference {args.reference}() raised {e!r}") from e
    else:
        import gymnasium

        try:
            reference = gymnasium.make(args.reference)
        except gymnasium.error.Error as e:
            raise ValueError(f"--reference {args.reference}: {e}") from e
    return reference, sync


def run(args) -> int:
    try:
        if not 0 <= args.seed < 2**32:
            raise ValueError(f"--seed must be in [0, 2^32), got {args.seed}")
        for flag, value in (
            ("--num-envs", args.num_envs),
            ("--num-steps", args.num_steps),
        ):
            if value >= MAX_INT:  # an array dimension
                raise ValueError(f"{flag} must be below 2^31, got {value}")
        env, params = envs.make(args.env)
        reference, sync = _reference(args)
    except (ValueError, KeyError) as e:
        if args.debug:
            raise
        return _error(e)
    try:  # looked up on its module, where the command-line tests replace it
        report = env_checks.check_env(
            env,
            params,
            name=args.env,
            num_envs=args.num_envs,
            num_steps=args.num_steps,
            seed=args.seed,
            reference_env=reference,
            sync_state=sync,
            reference_steps=args.reference_steps,
        )
    finally:
        if reference is not None:
            reference.close()
    print(report)
    return 0 if report.ok else 1
