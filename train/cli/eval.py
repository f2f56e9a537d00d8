"""``ondevice-rl eval`` and ``ondevice-rl render``: use what you trained.

``eval RUN_DIR`` restores the run's newest checkpoint that verifies (a
newer damaged one is named in one line and skipped) and runs ``--episodes``
whole episodes on the device, vmapped in one compiled program
(``ondevice_rl/evaluation.py``); it prints mean ± std, min and max of the returns and
lengths and writes ``eval.json`` (strict JSON) into RUN_DIR. ``render
RUN_DIR --out episode.gif`` draws one episode (``train/use/render.py``).
Both take a sweep's directory with ``--member N|best``: that member's final
parameters (``eval`` then writes ``eval-member-N.json`` there).
"""

import time
from pathlib import Path

import jax

from ondevice_rl.evaluation import evaluate, summarize
from ondevice_rl.ranges import MAX_INT
from ondevice_rl.train.cli.args import (
    check_out_file,
    int_arg,
    member_arg,
    member_file,
    one_line_errors,
    parse_member,
    positive_int_arg,
)
from ondevice_rl.train.cli.errors import WRITE_FAILED, fail
from ondevice_rl.train.kit.registry import algorithm_of
from ondevice_rl.train.run.artifacts import write_json
from ondevice_rl.train.run.checks import SEED_RANGE, RunArgError, check_seed
from ondevice_rl.train.services.writes import WriteFailed

EVAL_FILE = "eval.json"


def _seed_arg(parser) -> None:
    parser.add_argument(
        "--seed", type=int_arg, default=0, help=f"PRNG seed in {SEED_RANGE} (default 0)"
    )


def add_subcommands(subparsers, algo: str | None = None) -> None:
    del algo  # the run directory says which learner
    evaluate = subparsers.add_parser(
        "eval",
        help="evaluate a trained run's policy on many episodes, on the device",
        description="Restore RUN_DIR's newest checkpoint that verifies and run "
        "whole episodes vmapped in one compiled program; print return and "
        f"length statistics and write {EVAL_FILE} into RUN_DIR.",
    )
    evaluate.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    evaluate.add_argument(
        "--episodes",
        type=positive_int_arg,
        default=1000,
        metavar="N",
        help="episodes, run at once (default 1000)",
    )
    evaluate.add_argument(
        "--deterministic",
        action="store_true",
        help="greedy actions (argmax / Gaussian mean) instead of sampled ones",
    )
    _seed_arg(evaluate)
    member_arg(evaluate)
    evaluate.add_argument("--debug", action="store_true", help="show tracebacks")
    evaluate.set_defaults(func=_eval)
    one_line_errors(evaluate)

    render = subparsers.add_parser(
        "render",
        help="draw one episode of a trained run's policy to a GIF or MP4",
        description="One episode of RUN_DIR's policy, stepped on the device, "
        "drawn on the host: classic control by gymnasium's renderer (needs "
        "pygame: pip install 'ondevice_rl[render]'), brax and MJX by MuJoCo's "
        "on headless OpenGL (EGL or OSMesa; MUJOCO_GL picks), MinAtar as a "
        "grid of its channels.",
    )
    render.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    render.add_argument(
        "--out",
        type=Path,
        help="episode.gif or episode.mp4 (default: RUN_DIR/episode.gif)",
    )
    render.add_argument(
        "--deterministic", action="store_true", help="greedy actions, not sampled"
    )
    render.add_argument(
        "--fps", type=positive_int_arg, metavar="N", help="(default: the env's)"
    )
    render.add_argument(
        "--scale",
        type=float,
        default=1.0,
        metavar="X",
        help="resize the frames by X (default 1)",
    )
    _seed_arg(render)
    member_arg(render)
    render.add_argument("--debug", action="store_true", help="show tracebacks")
    render.set_defaults(func=_render)
    one_line_errors(render)


def _check_seed(seed: int) -> None:
    try:
        check_seed(seed)
    except RunArgError as e:
        raise ValueError(e.worded({"seed": "--seed"})) from None


def evaluate_run(
    run_dir: Path, episodes: int, deterministic: bool, seed: int, member=None
):
    """``(loaded run, evaluate's [episodes] arrays as NumPy, compile s, run s)``;
    ``member`` picks a sweep directory's member (its number or "best")."""
    # lazy: pulls in orbax (0.6-0.9 s), which `--help` does not need
    from ondevice_rl.train.use.loading import load_run

    if episodes >= MAX_INT:
        raise ValueError(f"--episodes must be below 2^31, got {episodes}")
    run = load_run(run_dir, member=member)
    trainer = run.trainer
    env_params = run.spec.env_params_tree()
    env_params = trainer.default_env_params if env_params is None else env_params

    def program(params, key):
        carry = trainer.initial_carry((episodes,))
        return evaluate(
            trainer.policy,
            params,
            trainer.env,
            env_params,
            key,
            episodes,
            deterministic,
            carry,
        )

    key = jax.random.key(seed)
    start = time.perf_counter()
    compiled = jax.jit(program).lower(run.params, key).compile()
    compile_s = time.perf_counter() - start
    result = jax.device_get(compiled(run.params, key))
    return run, result, compile_s, time.perf_counter() - start - compile_s


def _eval(args) -> int:
    try:
        _check_seed(args.seed)
        member = parse_member(args)
        run, result, compile_s, run_s = evaluate_run(
            args.run_dir, args.episodes, args.deterministic, args.seed, member
        )
    except (ValueError, KeyError, OSError) as e:
        if args.debug:
            raise
        return fail("eval", e)
    summary = summarize(result)
    config = run.spec.config
    mode = "deterministic" if args.deterministic else "sampled"
    which = f"checkpoint at update {run.step}"
    if run.member is not None:
        which = f"sweep member {run.member} after {run.step} updates"
    print(
        f"{config.env} ({algorithm_of(config).name}), {which}: "
        f"{args.episodes} episodes, {mode} actions"
    )
    for name in ("return", "length"):
        s = summary[name]
        print(
            f"  {name:<8} {s['mean']:10.2f} ± {s['std']:<8.2f} "
            f"(min {s['min']:.2f}, max {s['max']:.2f})"
        )
    print(f"  compile  {compile_s:10.2f} s, run {run_s:.2f} s")
    record = {
        "env": config.env,
        "algo": algorithm_of(config).name,
        "checkpoint": run.step,
        "episodes": args.episodes,
        "deterministic": args.deterministic,
        "seed": args.seed,
        "return": summary["return"],
        "length": summary["length"],
        "compile_s": compile_s,
        "run_s": run_s,
        "episode_returns": [float(x) for x in result["return"]],
        "episode_lengths": [int(x) for x in result["length"]],
    }
    path = args.run_dir / EVAL_FILE
    if run.member is not None:
        record["member"] = run.member
        path = args.run_dir / member_file(EVAL_FILE, run.member)
    try:
        write_json(path, record)
    except OSError as e:
        return fail(
            "eval",
            f"cannot write {path} ({e.strerror}); free space or fix permissions",
            WRITE_FAILED,
        )
    print(f"  file     {path}")
    return 0


def _render(args) -> int:
    # lazy: pulls in orbax, gymnasium (0.7-1 s), which `--help` does not need
    from ondevice_rl.train.use.render import render_run

    try:
        _check_seed(args.seed)
        member = parse_member(args)
        out = args.out
        if out is None:
            out = args.run_dir / member_file("episode.gif", member)
        else:
            check_out_file(out)
        done = render_run(
            args.run_dir,
            out,
            args.seed,
            args.deterministic,
            args.fps,
            args.scale,
            member,
        )
    except WriteFailed as e:
        if args.debug:
            raise
        return fail(
            "render",
            f"{e}; free space or fix permissions, or give another --out",
            WRITE_FAILED,
        )
    except (ValueError, KeyError, OSError) as e:
        if args.debug:
            raise
        return fail("render", e)
    print(
        f"wrote {done['path']}: {done['frames']} frames, return "
        f"{done['return']:.2f}, length {done['length']}"
    )
    return 0
