"""``ondevice_rl.run_training``: the ``ondevice-rl train`` command as a
Python call, keywords named as its flags.

    result = ondevice_rl.run_training(env="CartPole-v1", total_timesteps=100_000)
    result = ondevice_rl.run_training(recipe="cartpole_dqn", seed=1, out=None)

Both build the learner's config the same way (``prepare_run``: a recipe's
values, then the fields given), check every argument once before anything
is created or compiled (``check_new_run``, ``train/run/request.py``) and
keep every run: without ``out``, a new directory
``runs/<env>-<algo>-s<seed>-<YYYYmmdd-HHMMSS>`` (``new_run_dir``); with
``out=None`` nothing is written. The checked request then goes to
``runner.train``, as ``train_from_config``'s does. Both switch JAX's
persistent compilation cache on unless told not to
(``train/services/compile_cache.py``). Errors name the keywords
(``segments must be positive, got 0``), where the CLI names its flags.
"""

import contextlib
import datetime
import itertools
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ondevice_rl.train.kit.config import config_from_dict
from ondevice_rl.train.kit.registry import (
    DEFAULT,
    algorithm_of,
    get_algorithm,
    trainer_for,
)
from ondevice_rl.train.recipes.loader import load_recipe, recipe_env_params
from ondevice_rl.train.run.artifacts import RunDirArgError
from ondevice_rl.train.run.checks import DEFAULT_SEED, RunArgError, Worded, literal
from ondevice_rl.train.run.request import RunRequest, check_new_run
from ondevice_rl.train.run.result import RunResult
from ondevice_rl.train.run.runner import train
from ondevice_rl.train.services.compile_cache import use_compilation_cache

#: Where runs go without ``out`` (relative to the working directory).
RUNS_DIR = Path("runs")
#: How ``run_training`` names ``train_from_config``'s arguments.
KEYWORDS = {"out_dir": "out", "num_segments": "segments"}


class _NewRunDir:
    def __repr__(self) -> str:
        return f"<a new directory under {RUNS_DIR}/>"


#: ``out``'s default: a new run directory (``new_run_dir``).
NEW_RUN_DIR: Any = _NewRunDir()


def new_run_dir(
    env: str,
    algo: str,
    seed: int,
    root: Path = RUNS_DIR,
    now: datetime.datetime | None = None,
) -> Path:
    """Creates and returns ``root/<env>-<algo>-s<seed>-<YYYYmmdd-HHMMSS>``
    (``-2``, ``-3``, ... appended when a run of the same second has the
    name; characters other than letters, digits, ``.``, ``_`` and ``-``
    become ``-``)."""
    stamp = (now or datetime.datetime.now()).strftime("%Y%m%d-%H%M%S")
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{env}-{algo}-s{seed}-{stamp}")
    try:
        root.mkdir(parents=True, exist_ok=True)
        for n in itertools.count(1):
            path = root / (base if n == 1 else f"{base}-{n}")
            with contextlib.suppress(FileExistsError):
                path.mkdir()
                return path
    except OSError as e:
        raise RunDirArgError(
            f"{{out_dir}} {literal(root)}: cannot write there ({literal(e.strerror)})"
        ) from None
    raise AssertionError("unreachable")


def build_config(
    algo: str | None, recipe: str | None, fields: Mapping[str, Any], where: str
) -> Any:
    """The learner's config: ``recipe``'s values (if any), then ``fields``.
    ``algo`` defaults to the recipe's learner, else PPO. One-line
    ``ValueError``/``KeyError``/``FileNotFoundError`` otherwise."""
    base = {}
    if recipe is not None:
        loaded = load_recipe(recipe)
        if algo is None:
            algo = algorithm_of(loaded).name
        elif type(loaded) is not get_algorithm(algo).config:
            raise RunArgError(
                f"{{recipe}} {literal(recipe)} is for {type(loaded).__name__}, "
                f"not {{algo}} {literal(algo)}"
            )
        base = loaded.to_dict()
    algorithm = get_algorithm(algo or DEFAULT)
    return config_from_dict({**base, **fields}, algorithm, where=where)


def _env_params(
    config: Any, recipe: str | None, env_params: Mapping[str, Any] | None
) -> dict | None:
    """The recipe's ``[env_params]`` (checked here, so that an error names
    the recipe), then the caller's over them."""
    params = dict(recipe_env_params(recipe) or {}) if recipe is not None else {}
    if params:
        env = trainer_for(config).env.unwrapped
        try:
            env.check_params(params)
        except ValueError as e:
            raise RunArgError(
                f"{{recipe}} {literal(recipe)}: env_params: {literal(e)}"
            ) from None
    params.update(env_params or {})
    return params or None


def prepare_run(
    *,
    algo: str | None,
    recipe: str | None,
    fields: Mapping[str, Any],
    env_params: Mapping[str, Any] | None,
    seed: int,
    out: Any,
    where: str,
    force: bool = False,
    **run_args: Any,
) -> RunRequest:
    """The run of a learner's config built from ``recipe`` and ``fields``,
    checked once (``check_new_run``: its arguments, env params, devices,
    memory, W&B project and ``out``); then its directory: ``out``, or a new
    one (``created``) if ``out`` is ``NEW_RUN_DIR``."""
    config = build_config(algo, recipe, fields, where)
    params = _env_params(config, recipe, env_params)
    new = out is NEW_RUN_DIR
    request = check_new_run(
        config,
        seed=seed,
        env_params=params,
        out_dir=None if new else out,
        force=force,
        **run_args,
    )
    if not new:
        return request
    out = new_run_dir(config.env, algorithm_of(config).name, seed)
    return request._replace(out=out, created=True)


def run_training(
    env: str | None = None,
    *,
    algo: str | None = None,
    recipe: str | None = None,
    total_timesteps: int | None = None,
    seed: int = DEFAULT_SEED,
    out: str | Path | None = NEW_RUN_DIR,
    force: bool = False,
    segments: int | None = None,
    checkpoint_every: int | None = None,
    eval_every: int | None = None,
    eval_episodes: int | None = None,
    log_every: int | None = None,
    devices: int | str | None = None,
    progress: bool = True,
    compile_cache: bool = True,
    wandb: str | None = None,
    env_params: Mapping[str, Any] | None = None,
    **config_fields: Any,
) -> RunResult:
    """Trains one learner on one environment, as ``ondevice-rl train`` does.

    Args:
        env: the environment (default: the recipe's, else the config's).
        algo: the learner (``ppo``, ``a2c``, ``dqn``, ``pqn``, ``sac``,
            ``td3``; default: the recipe's, else ``ppo``).
        recipe: a shipped recipe's name or a TOML file; the other keywords
            override its values.
        total_timesteps: env steps to train for.
        seed: the run's PRNG seed, in ``[0, 2^32)``.
        out: the run directory; by default a new one under ``runs/``
            (``runs/<env>-<algo>-s<seed>-<time>``); ``None`` writes nothing
            (no files, checkpoints or resume).
        force: replace an earlier run in ``out``.
        segments: compiled segments to cut the run into (default
            ``DEFAULT_SEGMENTS``, then shorter ones if a segment takes over
            ``SEGMENT_SECONDS``; ``train/run/checks.py``).
        checkpoint_every: updates between checkpoints (default: time-based).
        eval_every, eval_episodes: evaluate the policy after every N-th
            update on K deterministic episodes, inside the program.
        log_every: updates per metrics row (default: a few per thousand of
            the run's updates: at most ``DEFAULT_LOG_ROWS`` rows).
        devices: split the environments over N devices, data-parallel
            (``"all"``: every device; PPO); default: one device.
        progress: a progress bar (plain lines without a terminal).
        compile_cache: JAX's persistent compilation cache
            (``~/.cache/ondevice_rl/jax``; ``ONDEVICE_RL_CACHE_DIR`` moves it).
        wandb: a Weights & Biases project to log to (the ``wandb`` extra).
        env_params: overrides of the env's params (``{"length": 0.8}``), over
            the recipe's ``[env_params]``; traced, checked before compiling.
        **config_fields: the learner's config fields (``num_envs``,
            ``learning_rate``, ``hidden``, ...; ``ondevice-rl train --algo
            NAME --help`` lists them).

    Returns:
        The ``RunResult``: ``out_dir``, ``final_return``, ``env_steps``,
        ``compile_s``, ``run_s``, ``metrics`` (one row per ``log_every``
        updates), ``state`` (the final train state); its ``repr`` is a
        short summary.

    Raises:
        ValueError, KeyError, FileNotFoundError: one line naming the keyword,
            before anything is created or compiled.
        RunWriteError: a write into the run directory failed.
    """
    fields = dict(config_fields, env=env, total_timesteps=total_timesteps)
    fields = {k: v for k, v in fields.items() if v is not None}
    try:
        request = prepare_run(
            algo=algo,
            recipe=recipe,
            fields=fields,
            env_params=env_params,
            seed=seed,
            out=out,
            where="run_training",
            force=force,
            wandb=wandb,
            num_segments=segments,
            checkpoint_every=checkpoint_every,
            eval_every=eval_every,
            eval_episodes=eval_episodes,
            log_every=log_every,
            devices=devices,
        )
        use_compilation_cache(compile_cache)
        if progress and request.out is not None:
            print(f"run directory: {request.out}", file=sys.stderr, flush=True)
        return train(request, progress)
    except Worded as e:
        e.reword(KEYWORDS)
        raise
