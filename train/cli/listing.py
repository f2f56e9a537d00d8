"""``ondevice-rl algos``, ``ondevice-rl envs`` and ``ondevice-rl recipes``:
tables of what there is to train."""

import sys
from collections.abc import Mapping

import numpy as np
from rich.console import Console
from rich.table import Table

from ondevice_rl import envs
from ondevice_rl.env.spaces import Box, Discrete
from ondevice_rl.envs.registry import plugin_of
from ondevice_rl.envs.suites import SUITES
from ondevice_rl.train.kit.registry import (
    DEFAULT,
    algorithm_of,
    algorithms,
    get_algorithm,
)
from ondevice_rl.train.recipes.loader import describe, list_recipes, load_recipe


def add_subcommands(subparsers, algo: str = DEFAULT) -> None:
    algos_parser = subparsers.add_parser("algos", help="list the learners")
    algos_parser.set_defaults(func=_algos)
    envs_parser = subparsers.add_parser("envs", help="list the environments")
    envs_parser.add_argument(
        "--full",
        action="store_true",
        help="also build the brax, mjx and JAX-suite envs (Craftax, Navix, ...) "
        "to show their spaces (seconds each)",
    )
    envs_parser.set_defaults(func=_envs)
    recipes_parser = subparsers.add_parser("recipes", help="list the shipped recipes")
    recipes_parser.set_defaults(func=_recipes)


def _space(space) -> str:
    if isinstance(space, Discrete):
        return f"Discrete({space.n})"
    if isinstance(space, Box):
        low, high = np.asarray(space.low), np.asarray(space.high)
        if low.size and (low == low.flat[0]).all() and (high == high.flat[0]).all():
            low, high = low.flat[0], high.flat[0]
        return f"Box({low}, {high}, shape={space.shape})"
    return repr(space)


def _observation(space) -> str:
    """``[4]``; ``uint8[8, 8, 3] categorical``; ``dict of 6, mask [4]``."""
    if isinstance(space, Mapping):
        mask = space.get("action_mask")
        text = f"dict of {len(space) - (mask is not None)}"
        return text + (f", mask [{mask.shape[0]}]" if mask is not None else "")
    if isinstance(space, Discrete):
        return f"Discrete({space.n})"
    dtype = np.dtype(space.dtype).name
    text = str(list(space.shape))
    if dtype != "float32":
        text = f"{dtype}{text}"
    return text + (" categorical" if getattr(space, "categorical", False) else "")


def _envs(args) -> int:
    plugins = envs.load_plugins()  # installed packages' environments
    table = Table(title="environments (or any package.module:factory)")
    columns = ("name", "observation", "action space", "time limit")
    for column in columns + (("package",) if plugins else ()):
        table.add_column(column, no_wrap=column == "name")
    unbuilt = {prefix: [] for prefix in SUITES}  # names listed below the table
    for name in envs.names():
        plugin = plugin_of(name)
        package = (plugin.distribution if plugin else "",) if plugins else ()
        prefix = name.partition("/")[0]
        if prefix in unbuilt and not args.full:
            unbuilt[prefix].append(name)
            continue
        if name.startswith(("brax/", "mjx/")) and not args.full:
            table.add_row(name, "-", "(--full builds it)", "-", *package)
            continue
        try:
            env, params = envs.make(name)
            obs = _observation(env.observation_space(params))
            action = _space(env.action_space(params))
            limit = getattr(params, "max_steps", None)
            limit = "-" if limit is None else str(int(limit))
        except Exception as e:  # an adapter whose backend is missing, say
            obs, action, limit = "-", f"unavailable: {type(e).__name__}", "-"
            if plugin is not None:
                # The message names the plugin's distribution.
                print(f"ondevice-rl envs: warning: {e}", file=sys.stderr)
        table.add_row(name, obs, action, limit, *package)
    console = Console()
    console.print(table)
    for prefix, names in unbuilt.items():
        if names:
            console.print(f"{prefix} ({len(names)}; --full builds them): ", end="")
            console.print(", ".join(names), highlight=False)
    return 0


def _algos(args) -> int:
    table = Table(title="learners (ondevice-rl train --algo NAME)")
    for column in ("name", "config", "actions", "traced hyperparameters", "summary"):
        table.add_column(column, no_wrap=column == "name")
    for name in algorithms():
        algorithm = get_algorithm(name)
        table.add_row(
            name,
            algorithm.config.__name__,
            algorithm.actions,
            ", ".join(algorithm.hyperparam_fields),
            algorithm.summary,
        )
    Console().print(table)
    return 0


def _recipes(args) -> int:
    table = Table(title="recipes (ondevice-rl train --recipe NAME)")
    for column in ("name", "algo", "env", "steps", "description"):
        table.add_column(column, no_wrap=column == "name")
    for name in list_recipes():
        config = load_recipe(name)
        table.add_row(
            name,
            algorithm_of(config).name,
            config.env,
            f"{config.total_timesteps:,}",
            describe(name),
        )
    Console().print(table)
    return 0
