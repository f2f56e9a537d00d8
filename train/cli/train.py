"""``ondevice-rl train``.

``train`` builds the chosen algorithm's config (``--algo``, default PPO, or
the recipe's) from a recipe (optional) overridden by flags, one flag per
config field, and checks the run once, as ``ondevice_rl.run_training`` does
(``prepare_run``, ``train/run/entry.py``); ``--resume`` checks the stored
run once (``check_resume``) and the flags given beside it against it. The
checked request goes to ``runner.train``; ``errors.fail`` words its errors
with the flags. Without ``--out`` the run gets a new directory under
``runs/``. JAX's persistent compilation cache is switched on here, not on
library import (``--no-compile-cache`` leaves it off;
``train/services/compile_cache.py``).
"""

import dataclasses
from pathlib import Path

from ondevice_rl.train.cli.args import (
    add_algo_argument,
    add_config_flags,
    flag_name,
    int_arg,
    one_line_errors,
)
from ondevice_rl.train.cli.errors import WRITE_FAILED, fail
from ondevice_rl.train.cli.train_report import RUN_FILES, report
from ondevice_rl.train.kit.registry import (
    DEFAULT,
    algorithm_of,
    algorithms,
    get_algorithm,
)
from ondevice_rl.train.run.artifacts import RunDirError
from ondevice_rl.train.run.checks import (
    CHECKPOINT_SECONDS,
    DEFAULT_EVAL_EPISODES,
    DEFAULT_LOG_ROWS,
    DEFAULT_SEED,
    DEFAULT_SEGMENTS,
    SEED_RANGE,
    SEGMENT_SECONDS,
)
from ondevice_rl.train.run.devices import ALL_DEVICES, data_parallel_learners
from ondevice_rl.train.run.entry import NEW_RUN_DIR, prepare_run
from ondevice_rl.train.run.request import RunRequest, check_resume
from ondevice_rl.train.run.runner import RunWriteError, train
from ondevice_rl.train.services.compile_cache import (
    CACHE_ENV,
    compilation_cache_dir,
    use_compilation_cache,
)


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
        "--seed",
        type=int_arg,
        help=f"PRNG seed in {SEED_RANGE} (default {DEFAULT_SEED})",
    )
    train.add_argument(
        "--out",
        type=Path,
        help=f"directory for {', '.join(RUN_FILES)} (default: a new "
        "runs/ENV-ALGO-sSEED-YYYYmmdd-HHMMSS; refused if it holds an earlier "
        "run, unless --resume or --force)",
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
        "--env-param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override one of the env's scalar params, traced (repeatable; "
        "over the recipe's [env_params]; an unknown NAME lists them)",
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
        help=f"number of compiled segments (default {DEFAULT_SEGMENTS}, then "
        f"shorter ones if one takes over {SEGMENT_SECONDS:g} s)",
    )
    train.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bar (without a terminal: no progress lines)",
    )
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
    train.add_argument(
        "--log-every",
        type=int_arg,
        metavar="N",
        help="updates per metrics row: means over the N updates, reduced on "
        "the device (default: 1, 2, 5, 10, 20, ..., the least that keeps the "
        f"run within {DEFAULT_LOG_ROWS} rows)",
    )
    train.add_argument(
        "--devices",
        type=_devices_arg,
        metavar=f"N|{ALL_DEVICES}",
        help="one large run over N devices (or all JAX shows): the environments "
        "split over them, gradients averaged (data-parallel; "
        f"{', '.join(data_parallel_learners())}). For GPUs and TPUs: simulated "
        "CPU devices share the same cores (default: one device)",
    )
    cache = compilation_cache_dir()
    where = f"in {cache}" if cache else f"off: {CACHE_ENV}=off"
    train.add_argument(
        "--no-compile-cache",
        action="store_true",
        help="compile without JAX's persistent compilation cache (default: on, "
        f"{where}; {CACHE_ENV}=DIR moves it)",
    )
    train.add_argument(
        "--wandb",
        metavar="PROJECT",
        help="also log the run's config and metrics to this Weights & Biases "
        "project (pip install 'ondevice_rl[wandb]'; WANDB_MODE=offline to "
        "sync later)",
    )
    add_config_flags(train, get_algorithm(_known(algo)))
    train.set_defaults(func=_train)
    one_line_errors(train)


def _devices_arg(text: str) -> int | str:
    """``--devices``: ``all`` or an integer (its range is the run's check)."""
    if text.strip() == ALL_DEVICES:
        return ALL_DEVICES
    return int_arg(text)


def config_fields(args) -> dict:
    """The config fields given as flags."""
    names = [f.name for f in dataclasses.fields(get_algorithm(args.algo).config)]
    return {k: getattr(args, k) for k in names if getattr(args, k, None) is not None}


def _env_params(items: list[str]) -> dict | None:
    """``--env-param NAME=VALUE`` flags as ``{NAME: VALUE}`` (the env checks
    names and ranges); ValueError in one line for a malformed one."""
    params = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            params[name.strip()] = float(value) if sep and name.strip() else None
        except ValueError:
            params[name.strip()] = None
        if params[name.strip()] is None:
            raise ValueError(f"--env-param: expected NAME=NUMBER, got {item!r}")
    return params or None


def _plain(value):
    """Lists and tuples alike, for comparing a flag with a stored field."""
    return list(value) if isinstance(value, tuple | list) else value


def _new_run(args) -> RunRequest:
    """The run the flags describe: the chosen algorithm's config (recipe
    values, then flags) and the run's arguments, checked once."""
    return prepare_run(
        algo=args.algo,
        recipe=args.recipe,
        fields=config_fields(args),
        env_params=_env_params(args.env_param),
        seed=DEFAULT_SEED if args.seed is None else args.seed,
        out=NEW_RUN_DIR if args.out is None else args.out,
        where="config",
        force=args.force,
        wandb=args.wandb,
        num_segments=args.segments,
        checkpoint_every=args.checkpoint_every,
        eval_every=args.eval_every,
        eval_episodes=args.eval_episodes,
        log_every=args.log_every,
        devices=args.devices,
    )


def _resumed_run(args) -> RunRequest:
    """The stored run in ``--resume``, checked once; the flags given beside
    it may not change its program: only ``--total-timesteps`` may differ
    (ValueError otherwise)."""
    request = check_resume(
        args.resume,
        total_timesteps=args.total_timesteps,
        checkpoint_every=args.checkpoint_every,
    )
    spec = request.spec
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
    if args.devices is not None:
        raise ValueError("--devices cannot change on --resume (the run goes on "
                         "over the devices it was split over)")  # fmt: skip
    if args.wandb is not None:
        raise ValueError("--wandb cannot change on --resume (a run logging to "
                         "W&B goes on logging there)")  # fmt: skip
    for flag, value, stored in (
        ("--eval-every", args.eval_every, spec.eval_every),
        ("--eval-episodes", args.eval_episodes, spec.eval_episodes),
        ("--log-every", args.log_every, spec.log_every),
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
    return request


def _train(args) -> int:
    """The run: checked once, then trained; its summary and exit status."""
    try:
        request = _resumed_run(args) if args.resume is not None else _new_run(args)
        cache = use_compilation_cache(not args.no_compile_cache)
        if request.created:
            print(f"run directory: {request.out}", flush=True)
        result = train(request, progress=not args.no_progress)
    except (ValueError, KeyError, FileNotFoundError, RunDirError) as e:
        if args.debug:
            raise
        return fail("train", e)
    except OSError as e:  # RunWriteError: a failed write stopped the run
        if args.debug:
            raise
        message = e if isinstance(e, RunWriteError) else f"{e.filename}: {e.strerror}"
        return fail("train", message, WRITE_FAILED)
    return report(result, cache)
