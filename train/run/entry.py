"""``ondevice_rl.run_training``: the ``ondevice-rl train`` command as a
Python call, keywords named as its flags.

    result = ondevice_rl.run_training(env="CartPole-v1", total_timesteps=100_000)
    result = ondevice_rl.run_training(recipe="cartpole_dqn", seed=1, out=None)

Both build the learner's config the same way (``prepare_run``: a recipe's
values, then the fields given), check every argument before anything is
created or compiled, and keep every run: without ``out``, a new directory
``runs/<env>-<algo>-s<seed>-<YYYYmmdd-HHMMSS>`` (``new_run_dir``); with
``out=None`` nothing is written. Both switch JAX's persistent compilation
cache on unless told not to (``train/services/compile_cache.py``). Errors
name the keywords (``segments must be positive, got 0``), where the CLI
names its flags.
"""

import contextlib
import datetime
import itertools
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from ondevice_rl.train.kit.registry import (
    DEFAULT,
    algorithm_of,
    get_algorithm,
    trainer_for,
)
from ondevice_rl.train.run.artifacts import LOCK_FILE, RunDirArgError, check_run_dir
from ondevice_rl.train.run.checks import RunArgError, Worded, check_run_args, literal
from ondevice_rl.train.run.run_spec import RunResult, RunSpec
from ondevice_rl.train.run.runner import train_from_config
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
    from ondevice_rl.train.recipes.loader import config_from_dict, load_recipe

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


class PreparedRun(NamedTuple):
    """A run checked before anything is created or compiled."""

    config: Any
    env_params: dict | None  # the recipe's [env_params], then the caller's
    out: Path | None
    created: bool  # ``out`` is a new directory made by ``new_run_dir``


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
    wandb: str | None = None,
    **run_args: Any,
) -> PreparedRun:
    """The config and env params, checked with the run's other arguments as
    ``train_from_config`` will check them (the env, the device memory and
    ``out`` too), then the directory: ``out``, or a new one (``created``)
    if ``out`` is ``NEW_RUN_DIR``."""
    from ondevice_rl.train.recipes.loader import recipe_env_params
    from ondevice_rl.train.services.memory import check_fits
    from ondevice_rl.train.services.wandb_log import WandbLog

    config = build_config(algo, recipe, fields, where)
    params = dict(recipe_env_params(recipe) or {}) if recipe is not None else {}
    if params:  # the recipe's own, named as its
        env = trainer_for(config).env.unwrapped
        try:
            env.check_params(params)
        except ValueError as e:
            raise RunArgError(
                f"{{recipe}} {literal(recipe)}: env_params: {literal(e)}"
            ) from None
    params.update(env_params or {})
    params = params or None
    check_run_args(checkpoint_every=run_args.pop("checkpoint_every", None))
    RunSpec.create(config, seed=seed, env_params=params, **run_args)
    check_fits(config)
    WandbLog.opener(wandb)  # an empty project name, no wandb package
    if out is not NEW_RUN_DIR and out is not None:
        check_run_dir(Path(out), force=force)
    if out is NEW_RUN_DIR:
        new = new_run_dir(config.env, algorithm_of(config).name, seed)
        return PreparedRun(config, params, new, True)
    return PreparedRun(config, params, None if out is None else Path(out), False)


@contextlib.contextmanager
def removed_if_empty(out: Path | None, created: bool) -> Iterator[None]:
    """A directory ``new_run_dir`` created is removed again if the run
    wrote nothing into it (refused before it started)."""
    try:
        yield
    finally:
        if created and out is not None:
            with contextlib.suppress(OSError):
                if all(p.name == LOCK_FILE for p in out.iterdir()):
                    (out / LOCK_FILE).unlink(missing_ok=True)
                    out.rmdir()


def run_training(
    env: str | None = None,
    *,
    algo: str | None = None,
    recipe: str | None = None,
    total_timesteps: int | None = None,
    seed: int = 0,
    out: str | Path | None = NEW_RUN_DIR,
    force: bool = False,
    segments: int | None = None,
    checkpoint_every: int | None = None,
    eval_every: int | None = None,
    eval_episodes: int | None = None,
    log_every: int | None = None,
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
        segments: compiled segments to cut the run into (default 20, then
            shorter ones if a segment takes over 10 s).
        checkpoint_every: updates between checkpoints (default: time-based).
        eval_every, eval_episodes: evaluate the policy after every N-th
            update on K deterministic episodes, inside the program.
        log_every: updates per metrics row (default: a few per thousand of
            the run's updates: at most 1000 rows).
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
    run_args = dict(
        checkpoint_every=checkpoint_every,
        eval_every=eval_every,
        eval_episodes=eval_episodes,
        log_every=log_every,
    )
    try:
        config, params, out_dir, created = prepare_run(
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
            **run_args,
        )
        with removed_if_empty(out_dir, created):
            use_compilation_cache(compile_cache)
            if progress and out_dir is not None:
                print(f"run directory: {out_dir}", file=sys.stderr, flush=True)
            return train_from_config(
                config,
                seed=seed,
                out_dir=out_dir,
                num_segments=segments,
                progress=progress,
                force=force,
                wandb=wandb,
                env_params=params,
                **run_args,
            )
    except Worded as e:
        e.reword(KEYWORDS)
        raise
