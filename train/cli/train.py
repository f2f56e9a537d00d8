"""``ondevice-rl train``.

``train`` builds the chosen algorithm's config (``--algo``, default PPO, or
the recipe's) from a recipe (optional) overridden by flags, one flag per
config field, and runs it with ``run_training``, which checks the run's
arguments (its errors name the flags: ``RUN_FLAGS``). JAX's
persistent compilation cache is switched on here, not on library import:
``~/.cache/ondevice_rl/jax`` unless ``ONDEVICE_RL_CACHE_DIR`` says otherwise
(``off`` disables it).
"""

import dataclasses
import os
import sys
from pathlib import Path

from ondevice_rl.train.cli.args import (
    add_algo_argument,
    add_config_flags,
    flag_name,
    int_arg,
    one_line_errors,
)
from ondevice_rl.train.cli.errors import WRITE_FAILED, fail
from ondevice_rl.train.kit.registry import DEFAULT, algorithms, get_algorithm
from ondevice_rl.train.run.artifacts import (
    CHECKPOINT_DIR,
    CONFIG_FILE,
    CURVE_FILE,
    METRICS_FILE,
)
from ondevice_rl.train.run.checks import (
    CHECKPOINT_SECONDS,
    DEFAULT_EVAL_EPISODES,
    DEFAULT_SEGMENTS,
    SEED_RANGE,
    RunArgError,
)

#: ``run_training``'s checked arguments as this command's flags.
RUN_FLAGS = {
    "seed": "--seed",
    "num_segments": "--segments",
    "checkpoint_every": "--checkpoint-every",
    "eval_every": "--eval-every",
    "eval_episodes": "--eval-episodes",
}
RUN_FILES = (CONFIG_FILE, METRICS_FILE, CURVE_FILE, f"{CHECKPOINT_DIR}/")
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


def _known(algo: str) -> str:
    """``algo`` if registered, else the default (its flags stand in until the
    run reports the unknown name)."""
    return algo if algo in algorithms() else DEFAULT


def add_subcommands(subparsers, algo: str = DEFAULT) -> None:
    train = subparsers.add_parser(
        "train",
        help=f"train one learner ({', '.join(algorithms())}) on one environment",
        description="Train as a few compiled segments, the state kept on the "
        "device. Flags override the recipe's values.",
    )
    add_algo_argument(train, algo)
    train.add_argument("--recipe", help="shipped recipe name or TOML file")
    train.add_argument(
        "--seed", type=int_arg, help=f"PRNG seed in {SEED_RANGE} (default 0)"
    )
    train.add_argument(
        "--out",
        type=Path,
        help=f"directory for {', '.join(RUN_FILES)} (refused if it holds an "
        "earlier run, unless --resume or --force)",
    )
    train.add_argument(
        "--resume",
        type=Path,
        metavar="RUN_DIR",
        help="continue the run in RUN_DIR from its newest checkpoint that "
        "verifies, with its stored config (--total-timesteps may extend it)",
    )
    train.add_argument(
        "--force", action="store_true", help="replace an earlier run in --out"
    )
    train.add_argument(
        "--checkpoint-every",
        type=int_arg,
        metavar="N",
        help="updates between checkpoints (default: at segment ends, at most "
        f"every {CHECKPOINT_SECONDS / 60:g} minutes of training; always at the end "
        "and when stopped)",
    )
    train.add_argument(
        "--debug", action="store_true", help="show tracebacks instead of one line"
    )
    train.add_argument(
        "--segments",
        type=int_arg,
        default=None,
        metavar="N",
        help=f"number of compiled segments (default {DEFAULT_SEGMENTS})",
    )
    train.add_argument("--no-progress", action="store_true", help="no progress bar")
    train.add_argument(
        "--eval-every",
        type=int_arg,
        metavar="N",
        help="after every N-th update, evaluate the policy on deterministic "
        "episodes inside the program (eval_return in metrics.jsonl and curve.png)",
    )
    train.add_argument(
        "--eval-episodes",
        type=int_arg,
        metavar="K",
        help=f"episodes per evaluation (default {DEFAULT_EVAL_EPISODES})",
    )
    add_config_flags(train, get_algorithm(_known(algo)))
    train.set_defaults(func=_train)
    one_line_errors(train)


def _build_config(args):
    """The chosen algorithm's config: recipe values, then flags. Raises
    ValueError/KeyError/FileNotFoundError with one-line messages (the env
    itself is checked by ``run_training``)."""
    from ondevice_rl.train.recipes.loader import config_from_dict, load_recipe

    algorithm = get_algorithm(args.algo)
    names = [f.name for f in dataclasses.fields(algorithm.config)]
    overrides = {
        k: getattr(args, k) for k in names if getattr(args, k, None) is not None
    }
    base = {}
    if args.recipe is not None:
        recipe = load_recipe(args.recipe)
        if type(recipe) is not algorithm.config:
            raise ValueError(
                f"recipe {args.recipe} is for {type(recipe).__name__}, not "
                f"--algo {algorithm.name}"
            )
        base = recipe.to_dict()
    return config_from_dict({**base, **overrides}, algorithm, where="config")


def _plain(value):
    """Lists and tuples alike, for comparing a flag with a stored field."""
    return list(value) if isinstance(value, tuple | list) else value


def _resume_flags(args) -> dict:
    """The flags given beside ``--resume``: only ``--total-timesteps`` may
    differ from the stored run (ValueError otherwise)."""
    from ondevice_rl.train.kit.registry import algorithm_of
    from ondevice_rl.train.run.run_spec import RunSpec

    spec = RunSpec.stored_in(args.resume)
    if args.out is not None or args.recipe is not None or args.force:
        raise ValueError("--resume takes no --out, --recipe or --force")
    stored_algo = algorithm_of(spec.config).name
    if args.algo != stored_algo:  # its default is the stored run's
        raise ValueError(
            f"--algo {args.algo} would change the program of the run in "
            f"{args.resume} ({stored_algo}); only --total-timesteps may change "
            "on --resume"
        )
    if args.seed is not None and args.seed != spec.seed:
        raise ValueError(f"--seed {args.seed} differs from the run's ({spec.seed})")
    if args.segments is not None:
        raise ValueError("--segments cannot change on --resume")
    for flag, value, stored in (
        ("--eval-every", args.eval_every, spec.eval_every),
        ("--eval-episodes", args.eval_episodes, spec.eval_episodes),
    ):
        if value is not None and value != stored:
            raise ValueError(f"{flag} {value} differs from the run's ({stored})")
    stored = spec.config.to_dict()
    for field in dataclasses.fields(spec.config):
        value = getattr(args, field.name, None)
        if value is None or field.name == "total_timesteps":
            continue
        if _plain(value) != _plain(stored[field.name]):
            raise ValueError(
                f"{flag_name(field.name)} {value} would change the program of the "
                f"run in {args.resume} (stored {stored[field.name]}); only "
                "--total-timesteps may change on --resume"
            )
    return {"total_timesteps": args.total_timesteps}


def _train(args) -> int:
    from ondevice_rl.train.run.artifacts import RunDirError
    from ondevice_rl.train.run.runner import (
        RunWriteError,
        resume_training,
        run_training,
    )

    try:
        if args.resume is not None:
            kwargs = _resume_flags(args)
            run = lambda: resume_training(  # noqa: E731
                args.resume,
                progress=not args.no_progress,
                checkpoint_every=args.checkpoint_every,
                **kwargs,
            )
        else:
            config = _build_config(args)
            run = lambda: run_training(  # noqa: E731
                config,
                seed=0 if args.seed is None else args.seed,
                out_dir=args.out,
                num_segments=args.segments,
                progress=not args.no_progress,
                checkpoint_every=args.checkpoint_every,
                force=args.force,
                eval_every=args.eval_every,
                eval_episodes=args.eval_episodes,
            )
        cache = enable_compilation_cache()
        result = run()
    except (ValueError, KeyError, FileNotFoundError, RunDirError) as e:
        if args.debug:
            raise
        return fail("train", e.worded(RUN_FLAGS) if isinstance(e, RunArgError) else e)
    except OSError as e:  # RunWriteError: a failed write stopped the run
        if args.debug:
            raise
        message = e if isinstance(e, RunWriteError) else f"{e.filename}: {e.strerror}"
        return fail("train", message, WRITE_FAILED)
    return _report(args, result, cache)


def _report(args, result, cache) -> int:
    import numpy as np

    from ondevice_rl.metrics import FINAL_WINDOW
    from ondevice_rl.train.kit.registry import algorithm_of
    from ondevice_rl.train.services.interrupt import EXIT_STATUS

    config = result.config
    updates = len(result.metrics.get("episode_return", []))
    status = (
        "stopped (non-finite values)"
        if result.nonfinite
        else "interrupted"
        if result.interrupted
        else "done"
    )
    print(
        f"{config.env} ({algorithm_of(config).name}): {status} after "
        f"{updates}/{config.num_updates} updates, "
        f"{result.env_steps:,} env steps"
    )
    print(
        f"  compile       {result.compile_s:8.2f} s"
        + (f"   (cache: {cache})" if cache else "")
    )
    print(f"  run           {result.run_s:8.2f} s   ({result.sps:,.0f} steps/s)")
    print(
        f"  final return  {result.final_return:8.2f}   (mean of the last "
        f"{min(updates, FINAL_WINDOW)} updates)"
    )
    evals = result.metrics.get("eval_return")
    if evals is not None and np.isfinite(evals).any():
        at = int(np.flatnonzero(np.isfinite(evals))[-1])
        print(f"  eval return   {evals[at]:8.2f}   (deterministic, update {at + 1})")
    if result.out_dir is not None:
        print(f"  files         {result.out_dir}/ ({', '.join(RUN_FILES)})")
    where = result.out_dir
    if result.nonfinite:
        kept = (
            f"last good checkpoint: update {result.checkpoint}"
            if result.checkpoint
            else "no checkpoint kept"
        )
        print(f"ondevice-rl train: {result.nonfinite}; {kept}", file=sys.stderr)
        return 3
    if result.interrupted:
        if where is not None:
            print(
                f"stopped at update {updates}/{config.num_updates}; resume with: "
                f"ondevice-rl train --resume {where}",
                file=sys.stderr,
            )
        return EXIT_STATUS.get(result.stop_signal, 130)
    return 0
