"""``ondevice-rl train``, ``ondevice-rl envs`` and ``ondevice-rl recipes``.

``train`` builds a ``PPOConfig`` from a recipe (optional) overridden by flags,
one flag per ``PPOConfig`` field, and runs it with ``run_training``. JAX's
persistent compilation cache is switched on here, not on library import:
``~/.cache/ondevice_rl/jax`` unless ``ONDEVICE_RL_CACHE_DIR`` says otherwise
(``off`` disables it).
"""

import argparse
import dataclasses
import os
import sys
from pathlib import Path

from ondevice_rl.train.ppo import PPOConfig

CACHE_ENV = "ONDEVICE_RL_CACHE_DIR"
_OFF = ("", "0", "off", "none", "false")


def compilation_cache_dir() -> Path | None:
    """Where compiled programs are cached: ``$ONDEVICE_RL_CACHE_DIR`` (None if
    it is ``off``), else ``$XDG_CACHE_HOME/ondevice_rl/jax`` or
    ``~/.cache/ondevice_rl/jax``."""
    value = os.environ.get(CACHE_ENV)
    if value is not None:
        return None if value.strip().lower() in _OFF else Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "ondevice_rl" / "jax"


def enable_compilation_cache() -> Path | None:
    """Points JAX's persistent compilation cache at ``compilation_cache_dir()``."""
    path = compilation_cache_dir()
    if path is not None:
        import jax

        path.mkdir(parents=True, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", str(path))
    return path


def _int(text: str) -> int:
    """An int, also written ``500_000`` or ``5e5``."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}")
    return int(value)


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.replace(",", " ").split())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of ints: {text!r}") from None


def _add_config_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per ``PPOConfig`` field, default None (= recipe or PPOConfig)."""
    group = parser.add_argument_group(
        "configuration (override the recipe; defaults are PPOConfig's)"
    )
    for field in dataclasses.fields(PPOConfig):
        flag = "--" + field.name.replace("_", "-")
        default = field.default
        kwargs = {"default": None, "dest": field.name}
        if isinstance(default, bool):
            kwargs["action"] = argparse.BooleanOptionalAction
        elif isinstance(default, int):
            kwargs.update(type=_int, metavar="N")
        elif isinstance(default, float):
            kwargs.update(type=float, metavar="X")
        elif isinstance(default, tuple):
            kwargs.update(type=_ints, metavar="N,N")
        else:
            kwargs.update(type=str, metavar=field.name.upper())
        shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
        group.add_argument(flag, help=f"(PPOConfig default: {shown})", **kwargs)


def _one_line_errors(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Bad flags give one line on stderr and exit status 2 (no usage dump)."""

    def error(message: str):
        parser.exit(2, f"{parser.prog}: error: {message}\n")

    parser.error = error
    return parser


def add_subcommands(subparsers) -> None:
    train = subparsers.add_parser(
        "train",
        help="train PPO on one environment",
        description="Train PPO as a few compiled segments, the state kept on "
        "the device. Flags override the recipe's values.",
    )
    train.add_argument("--recipe", help="shipped recipe name or TOML file")
    train.add_argument("--seed", type=_int, default=0, help="PRNG seed (default 0)")
    train.add_argument(
        "--out",
        type=Path,
        help="directory for config.json, metrics.jsonl, curve.png and checkpoint/",
    )
    train.add_argument(
        "--segments",
        type=_int,
        default=None,
        metavar="N",
        help="number of compiled segments (default 20)",
    )
    train.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_config_flags(train)
    train.set_defaults(func=_train)
    _one_line_errors(train)

    envs = subparsers.add_parser("envs", help="list the environments")
    envs.set_defaults(func=_envs)
    recipes = subparsers.add_parser("recipes", help="list the shipped recipes")
    recipes.set_defaults(func=_recipes)


def _error(command: str, message: object) -> int:
    if isinstance(message, KeyError) and message.args:
        message = message.args[0]  # str(KeyError) adds quotes
    print(f"ondevice-rl {command}: error: {message}", file=sys.stderr)
    return 2


def _build_config(args) -> PPOConfig:
    from ondevice_rl import envs
    from ondevice_rl.train.recipe import config_from_dict, load_recipe

    names = [f.name for f in dataclasses.fields(PPOConfig)]
    overrides = {k: getattr(args, k) for k in names if getattr(args, k) is not None}
    if args.recipe is not None:
        base = load_recipe(args.recipe).to_dict()
        config = config_from_dict({**base, **overrides}, where="config")
    else:
        config = config_from_dict(overrides, where="config")
    if config.env not in envs.names():
        envs.make(config.env)  # raises KeyError naming close matches
    return config


def _train(args) -> int:
    try:
        config = _build_config(args)
        if args.segments is not None and args.segments <= 0:
            raise ValueError(f"--segments must be positive, got {args.segments}")
        if args.seed < 0:
            raise ValueError(f"--seed must be non-negative, got {args.seed}")
    except (ValueError, KeyError, FileNotFoundError) as e:
        return _error("train", e)
    from ondevice_rl.train.runner import run_training

    cache = enable_compilation_cache()
    result = run_training(
        config,
        seed=args.seed,
        out_dir=args.out,
        num_segments=args.segments,
        progress=not args.no_progress,
    )
    updates = len(result.metrics["episode_return"])
    status = "interrupted" if result.interrupted else "done"
    print(
        f"{config.env}: {status} after {updates}/{config.num_updates} updates, "
        f"{result.env_steps:,} env steps"
    )
    print(
        f"  compile       {result.compile_s:8.2f} s"
        + (f"   (cache: {cache})" if cache else "")
    )
    print(f"  run           {result.run_s:8.2f} s   ({result.sps:,.0f} steps/s)")
    print(
        f"  final return  {result.final_return:8.2f}   (mean of the last "
        f"{min(updates, 10)} updates)"
    )
    if result.out_dir is not None:
        print(
            f"  files         {result.out_dir}/ (config.json, metrics.jsonl, "
            "curve.png, checkpoint/)"
        )
    return 130 if result.interrupted else 0


def _space(space) -> str:
    import numpy as np

    from ondevice_rl.spaces import Box, Discrete

    if isinstance(space, Discrete):
        return f"Discrete({space.n})"
    if isinstance(space, Box):
        low, high = np.asarray(space.low), np.asarray(space.high)
        if low.size and (low == low.flat[0]).all() and (high == high.flat[0]).all():
            low, high = low.flat[0], high.flat[0]
        return f"Box({low}, {high}, shape={space.shape})"
    return repr(space)


def _envs(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from ondevice_rl import envs

    table = Table(title="environments")
    for column in ("name", "observation", "action space", "time limit"):
        table.add_column(column, no_wrap=column == "name")
    for name in envs.names():
        try:
            env, params = envs.make(name)
            obs = str(list(env.observation_space(params).shape))
            action = _space(env.action_space(params))
            limit = getattr(params, "max_steps", None)
            limit = "-" if limit is None else str(int(limit))
        except Exception as e:  # an adapter whose backend is missing, say
            obs, action, limit = "-", f"unavailable: {type(e).__name__}", "-"
        table.add_row(name, obs, action, limit)
    Console().print(table)
    return 0


def _recipes(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from ondevice_rl.train.recipe import describe, list_recipes, load_recipe

    table = Table(title="recipes (ondevice-rl train --recipe NAME)")
    for column in ("name", "env", "steps", "description"):
        table.add_column(column, no_wrap=column == "name")
    for name in list_recipes():
        config = load_recipe(name)
        table.add_row(name, config.env, f"{config.total_timesteps:,}", describe(name))
    Console().print(table)
    return 0
