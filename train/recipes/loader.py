"""Recipes: TOML files of one learner's config fields, shipped in
``train/recipes/``.

A recipe is a flat table: an optional ``algo`` key (a registered algorithm;
``ppo`` when absent), then that algorithm's config field names::

    # CartPole-v1 with CleanRL's PPO settings.
    algo = "ppo"
    env = "CartPole-v1"
    total_timesteps = 500_000
    num_envs = 4

An optional ``[env_params]`` table overrides the environment's default
parameters (traced, like a sweep's ``--env-param``), e.g. a longer memory
chain::

    env = "gymnax/MemoryChain-bsuite"
    [env_params]
    memory_length = 30

Missing keys keep the config's defaults. Integer fields accept integral
floats (``5e5``); ``hidden`` is a list of ints. The first ``#`` line is the
recipe's one-line description; the rest of the leading comment records how it
was measured.
"""

import difflib
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from typing import Any

from ondevice_rl.train.kit.config import config_from_dict
from ondevice_rl.train.kit.registry import DEFAULT, get_algorithm

RECIPE_DIR = Path(__file__).parent
ALGO_KEY = "algo"
ENV_PARAMS_KEY = "env_params"


def list_recipes() -> list[str]:
    """Names of the shipped recipes (file stems in ``train/recipes/``), sorted."""
    return sorted(p.stem for p in RECIPE_DIR.glob("*.toml"))


def recipe_path(name_or_path: str | Path) -> Path:
    """A shipped recipe's file, or ``name_or_path`` itself if it is a file.

    Raises:
        FileNotFoundError: neither; the message lists the shipped recipes.
    """
    path = Path(name_or_path)
    try:
        if path.is_file():
            return path
    except OSError:  # a name too long: no such file, named below
        pass
    if path.parent == Path(".") and path.suffix in ("", ".toml"):
        shipped = RECIPE_DIR / f"{path.stem}.toml"
        if shipped.is_file():
            return shipped
    names = list_recipes()
    close = difflib.get_close_matches(str(name_or_path), names, n=3, cutoff=0.4)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    raise FileNotFoundError(
        f"unknown recipe {str(name_or_path)!r}.{hint} "
        f"Shipped recipes: {', '.join(names)}."
    )


def describe(name_or_path: str | Path) -> str:
    """The recipe's one-line description: its first ``#`` comment line."""
    for line in recipe_path(name_or_path).read_text().splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip()
        if line.strip():
            break
    return ""


def _read(name_or_path: str | Path) -> tuple[Path, dict]:
    path = recipe_path(name_or_path)
    try:
        values = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"recipe {path}: invalid TOML: {e}") from None
    except UnicodeDecodeError:
        raise ValueError(f"recipe {path}: not a text file") from None
    except OSError as e:
        raise ValueError(f"recipe {path}: cannot read it ({e.strerror})") from None
    return path, values


def recipe_algorithm(name_or_path: str | Path) -> str:
    """The recipe's ``algo`` (``ppo`` when absent); ValueError if unknown."""
    path, values = _read(name_or_path)
    name = values.get(ALGO_KEY, DEFAULT)
    if not isinstance(name, str):
        raise ValueError(f"recipe {path.name}: algo must be a name, got {name!r}")
    try:
        get_algorithm(name)
    except KeyError as e:
        raise ValueError(f"recipe {path.name}: {e.args[0]}") from None
    return name


def load_recipe(name_or_path: str | Path) -> Any:
    """Reads a shipped recipe (by name, e.g. ``"cartpole_ppo"``) or a TOML
    file; returns its algorithm's config (``PPOConfig``, ``A2CConfig``, ...).

    Raises:
        FileNotFoundError: no such recipe.
        ValueError: invalid TOML, unknown algorithm, or bad keys/values (see
            ``config_from_dict``).
    """
    path, values = _read(name_or_path)
    algo = recipe_algorithm(path)
    values = {k: v for k, v in values.items() if k not in (ALGO_KEY, ENV_PARAMS_KEY)}
    return config_from_dict(values, get_algorithm(algo), where=f"recipe {path.name}")


def recipe_env_params(name_or_path: str | Path) -> dict | None:
    """The recipe's ``[env_params]`` table (None when it has none); the env
    checks names and values when a run is set up.

    Raises:
        ValueError: ``env_params`` is not a table.
    """
    path, values = _read(name_or_path)
    table = values.get(ENV_PARAMS_KEY)
    if table is not None and not isinstance(table, dict):
        raise ValueError(f"recipe {path.name}: env_params must be a table")
    return table
