"""Arguments of ``ondevice-rl bench host``: its own flags only.

Everything is checked before anything compiles: the learner drives from the
host, each host env builds, each ``--port`` has the host env's spaces,
backends named exist and (EnvPool) are installed.
"""

import json
import sys
from pathlib import Path

from ondevice_rl.train.bench import host
from ondevice_rl.train.bench.host.learner import LEARNERS
from ondevice_rl.train.bench.host.report import plot_host, print_host
from ondevice_rl.train.bench.host.targets import host_target
from ondevice_rl.train.bench.report import write_json
from ondevice_rl.train.cli.args import names_arg, positive_int_arg
from ondevice_rl.train.cli.seeds import SeedsError, parse_keys
from ondevice_rl.train.kit.registry import algorithms
from ondevice_rl.train.services.machine import label, machine
from ondevice_rl.train.services.writes import WriteFailed, write_whole


class HostError(ValueError):
    pass


def add_parser(parts) -> None:
    """``bench host`` under ``bench``'s parts."""
    parser = parts.add_parser(
        "host",
        help="your simulator on the host vs its JAX port: speed and device busy share",
        description="Train the same on-policy learner on a host simulator through "
        "each host backend (gymnasium sync/async, EnvPool sync/async/XLA) and, "
        "when a JAX port exists, as one fused program: env steps/s, updates/s, "
        "host-device transfers per update, final return and the device's busy "
        "share (its compiled work over the wall time). A table per env, "
        "host.json and host.png to --out.",
        epilog="Example: ondevice-rl bench host --envs CartPole-v1,Acrobot-v1 "
        "--seeds 0..3;  ondevice-rl bench host --envs Hopper-v4 --port "
        "Hopper-v4=brax/hopper",
    )
    parser.add_argument(
        "--envs", type=names_arg, default=host.DEFAULT_ENVS, metavar="ENV[,ENV]",
        help="gymnasium ids or module:factory entries returning a gymnasium env "
        "(default: CartPole-v1)",
    )  # fmt: skip
    parser.add_argument(
        "--backends", type=names_arg, default=None, metavar="B[,B]",
        help=f"of {', '.join(host.BACKENDS)} (default: all; EnvPool's when "
        "installed)",
    )  # fmt: skip
    parser.add_argument(
        "--port", action="append", default=[], metavar="HOST=PORT",
        help="the JAX port of a host env, a registered name or module:factory "
        "(default: the registered env of the same name, if any); repeatable",
    )  # fmt: skip
    parser.add_argument(
        "--algo", default="ppo", metavar="NAME",
        help="on-policy learner: ppo or a2c (its recipe for the port when one "
        "ships, else its defaults)",
    )  # fmt: skip
    parser.add_argument(
        "--num-envs", type=positive_int_arg, default=host.DEFAULT_NUM_ENVS,
        metavar="B", help=f"envs per backend (default {host.DEFAULT_NUM_ENVS})",
    )  # fmt: skip
    parser.add_argument(
        "--num-steps",
        type=positive_int_arg,
        default=None,
        metavar="T",
        help="steps per env per rollout (default: the recipe's, else the learner's)",
    )
    parser.add_argument(
        "--async-batch", type=positive_int_arg, default=None, metavar="M",
        help="envpool-async: envs the policy acts on per call, < --num-envs "
        "(default: half)",
    )  # fmt: skip
    parser.add_argument(
        "--timesteps", type=positive_int_arg, default=None, metavar="T",
        help=f"env steps per seed and backend (default {host.DEFAULT_TIMESTEPS:,}"
        f", quick {host.QUICK_TIMESTEPS:,})",
    )  # fmt: skip
    parser.add_argument(
        "--seeds", default="0", metavar="A..B|a,b,c",
        help="seeds: env seed s and key jax.random.PRNGKey(s) each (default 0)",
    )  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="a short run")
    parser.add_argument(
        "--out", type=Path, default=Path("."), metavar="DIR",
        help="where host.json and host.png go (default: .)",
    )  # fmt: skip
    parser.add_argument(
        "--json", action="store_true",
        help="also print the results as one JSON line, the last on stdout",
    )  # fmt: skip
    parser.set_defaults(func=run, part="host")


def _log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def _ports(entries: list[str]) -> dict:
    ports = {}
    for entry in entries:
        spec, sep, port = entry.partition("=")
        if not sep or not spec or not port:
            raise HostError(f"--port {entry!r}: write HOST=PORT")
        ports[spec] = port
    return ports


def _backends(names: tuple[str, ...] | None) -> tuple[str, ...]:
    if names is None:
        if host.envpool_installed():
            return host.BACKENDS
        _log(f"EnvPool backends skipped: {host.ENVPOOL_EXTRA}")
        return tuple(b for b in host.BACKENDS if b not in host.ENVPOOL_BACKENDS)
    unknown = [n for n in names if n not in host.BACKENDS]
    if unknown or not names:
        raise HostError(
            f"--backends: unknown {', '.join(unknown) or '(none given)'}; "
            f"choose from {', '.join(host.BACKENDS)}"
        )
    if any(n in host.ENVPOOL_BACKENDS for n in names) and not host.envpool_installed():
        raise HostError(f"--backends {','.join(names)}: {host.ENVPOOL_EXTRA}")
    return names


def check(args) -> dict:
    """The run's settings, or ``HostError`` (one line) before any compile."""
    if args.algo not in algorithms():
        raise HostError(f"--algo {args.algo!r}: choose ppo or a2c")
    if args.algo not in LEARNERS:
        raise HostError(f"--algo {args.algo}: bench host drives ppo or a2c")
    try:
        seeds = parse_keys(args.seeds)
    except SeedsError as e:
        raise HostError(str(e).replace("--keys", "--seeds")) from None
    if args.async_batch is not None and args.async_batch >= args.num_envs:
        raise HostError(
            f"--async-batch {args.async_batch}: must be below --num-envs "
            f"{args.num_envs}"
        )
    timesteps = args.timesteps or (
        host.QUICK_TIMESTEPS if args.quick else host.DEFAULT_TIMESTEPS
    )
    ports = _ports(args.port)
    stray = [s for s in ports if s not in args.envs]
    if stray:
        raise HostError(f"--port {stray[0]}=...: {stray[0]} is not in --envs")
    if not args.envs:
        raise HostError("--envs: name at least one env")
    for spec in args.envs:
        try:
            host_target(
                spec, ports.get(spec), args.algo, args.num_envs, timesteps,
                args.num_steps,
            )  # fmt: skip
        except (KeyError, ValueError, ImportError, AttributeError) as e:
            message = e.args[0] if e.args else type(e).__name__
            if "total_timesteps" in str(message):  # the learner's config
                raise HostError(f"--timesteps {timesteps}: {message}") from None
            raise HostError(f"--envs {spec}: {message}") from None
        except Exception as e:  # gymnasium's own errors, a factory's
            raise HostError(f"--envs {spec}: {type(e).__name__}: {e}") from None
    return dict(
        specs=args.envs, backends=_backends(args.backends), algo=args.algo,
        num_envs=args.num_envs, num_steps=args.num_steps, timesteps=timesteps,
        seeds=seeds, ports=ports, async_batch=args.async_batch,
    )  # fmt: skip


def run(args) -> int:
    try:
        settings = check(args)
        try:
            if args.out.exists() and not args.out.is_dir():
                raise HostError(f"--out {args.out} is a file, not a directory")
            args.out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            message = f"--out {args.out}: cannot create it ({e.strerror})"
            raise HostError(message) from None
    except HostError as e:
        print(f"ondevice-rl bench host: error: {e}", file=sys.stderr)
        return 2
    record = host.run_host_bench(**settings, log=_log)
    record["machine"] = facts = machine()
    print_host(record)
    try:
        write_whole(args.out / "host.json", lambda p: write_json(record, p))
        write_whole(args.out / "host.png", lambda p: plot_host(record, p, label(facts)))
    except WriteFailed as e:
        print(f"ondevice-rl bench host: error: {e}", file=sys.stderr)
        return 1
    _log(f"wrote {args.out / 'host.json'} and {args.out / 'host.png'}")
    if args.json:
        print(json.dumps(record, default=float), flush=True)
    return 0
