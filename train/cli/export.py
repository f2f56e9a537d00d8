"""``ondevice-rl export RUN_DIR --out policy.bin``: the run's deterministic
policy as a serialized ``jax.export`` artifact that JAX alone loads
(``train/use/export.py``); a sweep's directory with ``--member N|best``."""

from pathlib import Path

from ondevice_rl.train.cli.args import (
    check_out_file,
    member_arg,
    member_file,
    one_line_errors,
    parse_member,
)
from ondevice_rl.train.cli.errors import WRITE_FAILED, fail


def add_subcommands(subparsers, algo: str | None = None) -> None:
    del algo  # the run directory says which learner
    export = subparsers.add_parser(
        "export",
        help="write a trained run's policy as a jax.export artifact",
        description="Serialize RUN_DIR's deterministic policy, parameters and "
        "observation statistics embedded, as a jax.export artifact with a "
        "symbolic batch dimension. Load it with JAX alone: "
        "jax.export.deserialize(open(PATH, 'rb').read()).call(obs) (with a "
        "carry, call(obs, carry) -> (action, carry), for a policy with memory).",
    )
    export.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    export.add_argument(
        "--out", type=Path, help="the artifact (default: RUN_DIR/policy.bin)"
    )
    export.add_argument(
        "--platforms",
        default="cpu,cuda,rocm,tpu",
        metavar="LIST",
        help="platforms to lower for, comma-separated (default cpu,cuda,rocm,tpu)",
    )
    member_arg(export)
    export.add_argument("--debug", action="store_true", help="show tracebacks")
    export.set_defaults(func=_export)
    one_line_errors(export)


def _export(args) -> int:
    # lazy: pulls in orbax (0.6-0.9 s), which `--help` does not need
    from ondevice_rl.train.use.export import export_policy, signature, write_artifact

    try:
        member = parse_member(args)
    except ValueError as e:
        return fail("export", e)
    out = (
        args.out
        if args.out is not None
        else args.run_dir / member_file("policy.bin", member)
    )
    platforms = tuple(p.strip() for p in args.platforms.split(",") if p.strip())
    try:
        if args.out is not None:
            check_out_file(out)
        elif out.is_dir():  # RUN_DIR/policy.bin (RUN_DIR itself: checked below)
            raise ValueError(f"--out {out} is a directory; name the file")
    except ValueError as e:
        return fail("export", e)
    except OSError as e:
        return fail("export", f"{args.run_dir}: cannot use it ({e.strerror})")
    try:
        exported = export_policy(args.run_dir, None, platforms, member=member)
    except (ValueError, KeyError, OSError) as e:
        if args.debug:
            raise
        return fail("export", e)
    try:
        size = write_artifact(exported, out)
    except OSError as e:
        return fail(
            "export",
            f"cannot write {out} ({e.strerror}); free space or fix permissions, "
            "or give another --out",
            WRITE_FAILED,
        )
    print(f"wrote {out}: {size:,} bytes, for {', '.join(exported.platforms)}")
    print(f"  {signature(exported)}")
    return 0
