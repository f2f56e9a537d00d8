"""Fuzzed command lines, recipe files and run directories (hypothesis).

Every command (``train``, ``sweep``, ``seeds``, ``eval``, ``render``,
``export``, ``plot``, ``bench`` and its parts, ``check-env``) gets argument lists of
flags in any order, each value drawn from valid ones and from bad ones: out
of range, of the wrong type, empty, NaN, inf, huge, negative, unknown names
(envs, learners, recipes, flags), paths that do not exist, files where a
directory is expected. Recipe files and a run's ``config.json`` are fuzzed
the same way. Whatever comes:

* no exception escapes ``main`` but argparse's ``SystemExit``, and stderr
  holds no traceback;
* a list holding a bad value exits with status 2, the last line of stderr
  the one ``ondevice-rl CMD: error: ...`` line, naming a flag (or the
  file's key) that was wrong; nothing is written: the working directory
  (every path given lies in it) stays as it was;
* a valid list gets to where the work starts: the seams where a command
  hands over to compiling, training, measuring or drawing (``SEAMS``)
  raise ``Reached`` here, so a valid list costs only its parsing and
  checking, and every check must come before them.

Each generated argument is tagged good, bad or maybe (valid alone, but
perhaps not beside the others: divisibility, device memory, ...): a list
with a maybe may also be refused, naming a bad or maybe one. The default
set is small; ``-m slow`` runs many more examples, and every learner's
config flags.
"""

import contextlib
import importlib
import io
import json
import math
import os
import re
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import jax
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ondevice_rl.train.cli import main
from ondevice_rl.train.kit.registry import algorithms, get_algorithm
from ondevice_rl.train.services.compile_cache import use_compilation_cache

# Its module-scoped programs are built once: its tests share one xdist worker.
pytestmark = pytest.mark.xdist_group("cli-fuzz")

# --------------------------------------------------------------------------
# Running the CLI


class Reached(Exception):
    """A valid argument list got to where the work starts."""


def _reached(*args, **kwargs):
    raise Reached


#: Where each command hands over to the work: (module, attribute).
SEAMS = (
    # train and train --resume: after the run directory's checks and, on
    # resume, the checkpoint's, the run's files are opened, then compiled.
    ("ondevice_rl.train.run.runner", "RunFiles"),
    ("ondevice_rl.train.cli.sweep", "_sweep"),
    ("ondevice_rl.train.cli.eval", "evaluate"),  # traced by eval's program
    ("ondevice_rl.train.use.render", "episode"),
    ("ondevice_rl.train.use.export", "exported_policy"),
    ("ondevice_rl.train.use.plots", "plot_series"),
    ("ondevice_rl.train.bench.env_speed", "run_env_bench"),
    ("ondevice_rl.train.bench.train_speed", "run_train_bench"),
    ("ondevice_rl.train.bench.host", "run_host_bench"),
    ("ondevice_rl.train.bench.gpu_suite", "run_gpu_suite"),
    ("ondevice_rl.train.bench.launches", "run_launches"),
    ("ondevice_rl.checks.check_env", "check_env"),
    ("ondevice_rl.train.sweep.seed_sets", "measure"),
    ("ondevice_rl.train.sweep.compare", "run_method"),  # after every check
    ("jax.distributed", "initialize"),  # sweep's multi-host start
)
REACHED = "reached"


@contextlib.contextmanager
def stopped_at_work():
    with pytest.MonkeyPatch.context() as patch:
        for module, name in SEAMS:
            patch.setattr(importlib.import_module(module), name, _reached)
        yield


@contextlib.contextmanager
def isolated():
    """What a command changes in this process is put back afterwards:
    environment variables, JAX settings, the hooks ``errors.fail`` quiets."""
    environ = dict(os.environ)
    hooks = threading.excepthook, sys.unraisablehook
    collectives = jax.config.jax_cpu_collectives_implementation
    for name in list(os.environ):
        if name.startswith("ONDEVICE_RL_") and name != "ONDEVICE_RL_CACHE_DIR":
            del os.environ[name]  # the multi-host variables
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(environ)
        threading.excepthook, sys.unraisablehook = hooks
        jax.config.update("jax_cpu_collectives_implementation", collectives)
        use_compilation_cache(True)  # as tests/conftest.py has it


def run_cli(argv: list[str], cwd: Path) -> tuple[object, str]:
    """``(exit status or REACHED, stderr)`` of ``main(argv)`` run in ``cwd``;
    any other exception propagates (a traceback is a failure)."""
    out, err = io.StringIO(), io.StringIO()
    with (
        isolated(),
        contextlib.chdir(cwd),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            status = main(list(argv))
        except SystemExit as e:
            status = e.code
        except Reached:
            status = REACHED
    return status, err.getvalue()


def snapshot(root: Path) -> dict[str, tuple]:
    """Every path under ``root`` (links not followed) with its size and
    modification time (None for directories)."""
    seen = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            info = os.lstat(path)
            kind = None if name in dirs and not os.path.islink(path) else info
            seen[os.path.relpath(path, root)] = kind and (
                kind.st_size,
                kind.st_mtime_ns,
            )
    return seen


# --------------------------------------------------------------------------
# What is generated

GOOD, BAD, MAYBE = "good", "bad", "maybe"


class Arg(NamedTuple):
    """Command-line words of one argument, whether they are valid, and
    what a refusal of them may name."""

    tokens: tuple[str, ...]
    kind: str
    names: tuple[str, ...]
    flag: str = ""  # the flag (or positional) they give
    value: str | None = None


class Flag(NamedTuple):
    """A flag's values: valid ones, bad ones, maybes; ``switch``: takes no
    value (``negatable``: ``--no-X`` too)."""

    good: tuple = ()
    bad: tuple = ()
    maybe: tuple = ()
    names: tuple = ()
    switch: bool = False
    negatable: bool = False
    repeat: bool = False
    value_named: bool = False  # a refusal may name the value instead


#: Directory entries of every example's working directory.
FILE, EMPTY, RUN, MISSING, GIF_DIR = "afile", "emptydir", "run", "nodir", "adir.gif"
OLD = "olddir"  # a directory holding something: an earlier run, to train
LONG = "x" * 300  # longer than a file name may be
LOCK = ".lock"  # a run's lock file (train/run/lock.py)

NOT_INT = ("", " ", "abc", "1.5", "nan", "inf", "-inf", "1e999", "0x10", "1,2", "--")
NOT_FLOAT = ("", " ", "abc", "1,5", "--", "1e", "0x1p3")
NONFINITE = ("nan", "inf", "-inf", "NaN", "Infinity", "1e999", "-1e999")
NEGATIVE = ("-1", "-7", "-2147483649")


def _names(flag: str, extra: tuple) -> tuple[str, ...]:
    return (flag, flag.lstrip("-").replace("-", "_"), *extra)


def _valued(flag: str, kind: str, value: str, joined: bool, names) -> Arg:
    if joined or value.startswith("-"):
        tokens = (f"{flag}={value}",)
    else:
        tokens = (flag, value)
    return Arg(tokens, kind, _names(flag, names), flag, value)


@st.composite
def flag_arg(draw, flag: str, spec: Flag, clean: bool) -> Arg:
    """One use of ``flag``: a valid one when ``clean``."""
    names = _names(flag, spec.names)
    if spec.switch:
        words = [flag, "--no-" + flag[2:]] if spec.negatable else [flag]
        if clean or draw(st.booleans()):
            return Arg((draw(st.sampled_from(words)),), GOOD, names, flag)
        return Arg((f"{flag}=x",), BAD, names, flag)  # a switch takes no value
    pools = {GOOD: spec.good, MAYBE: spec.maybe, BAD: () if clean else spec.bad}
    kinds = [k for k in (GOOD, MAYBE) if pools[k]] + [BAD, BAD] * bool(pools[BAD])
    kind = draw(st.sampled_from(kinds))  # bad values half the time
    value = draw(st.sampled_from(pools[kind]))
    names = spec.names + ((value,) if spec.value_named and value.strip() else ())
    return _valued(flag, kind, value, draw(st.booleans()), names)


def _usable(spec: Flag, clean: bool) -> bool:
    return not clean or spec.switch or bool(spec.good or spec.maybe)


UNKNOWN = (
    Arg(("--bogus-flag",), BAD, ("--bogus-flag",), "--bogus-flag"),
    Arg(("--bogus-flag=1",), BAD, ("--bogus-flag",), "--bogus-flag"),
    Arg(("--num_envs", "4"), BAD, ("--num_envs",), "--num_envs"),
    Arg(("stray",), BAD, ("stray",), "stray"),
)


@st.composite
def arguments(
    draw,
    flags: dict[str, Flag],
    positional: tuple[str, Flag] | None = None,
    max_flags: int = 5,
    unknown: bool = True,
) -> list[Arg]:
    """Some of ``flags`` (and the positional), shuffled; all valid when the
    example is clean."""
    clean = draw(st.booleans())
    usable = sorted(f for f, spec in flags.items() if _usable(spec, clean))
    chosen = draw(st.lists(st.sampled_from(usable), max_size=max_flags))
    args = []
    for flag in dict.fromkeys(chosen):
        spec = flags[flag]
        uses = draw(st.integers(1, 2)) if spec.repeat else 1
        args += [draw(flag_arg(flag, spec, clean)) for _ in range(uses)]
    if positional is not None:
        name, spec = positional
        arg = draw(flag_arg(name, spec, clean))
        paths = (arg.value, *arg.value.split(" "), str(Path(arg.value)))
        paths += (repr(arg.value),) if not arg.value.strip() else ()
        args.append(arg._replace(tokens=(arg.value,), names=arg.names + paths))
    if not clean and unknown and draw(st.integers(0, 4)) == 0:
        extra = draw(st.sampled_from(UNKNOWN))
        if positional is not None:  # a stray word may take its place
            extra = extra._replace(names=extra.names + args[-1].names)
        args.append(extra)
    return draw(st.permutations(args))


def given_flags(args: list[Arg]) -> dict[str, Arg]:
    return {a.flag: a for a in args}


def retag(args: list[Arg], flag: str, kind: str, *names: str) -> list[Arg]:
    """``flag``'s arguments as ``kind``, also naming ``names``."""
    return [
        a._replace(kind=kind, names=a.names + names) if a.flag == flag else a
        for a in args
    ]


def value_named(args: list[Arg], positional: str) -> list[Arg]:
    """A bad ``positional``'s error names its value, not a flag."""
    arg = given_flags(args)[positional]
    return retag(args, positional, BAD, arg.value) if arg.kind == BAD else args


def tokens(words: tuple[str, ...], args: list[Arg]) -> list[str]:
    return [*words, *(t for a in args for t in a.tokens)]


# --------------------------------------------------------------------------
# The verdict


def _named(message: str, name: str) -> bool:
    """``name`` stands in ``message`` as a word of its own."""
    if not name:
        return False
    return bool(re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", message))


def judge(
    command: str,
    args: list[Arg],
    status: object,
    err: str,
    before: dict,
    after: dict,
    argv: list[str],
    must_name: str = "",
) -> None:
    """The requirements of the module docstring for one call (a refusal
    also names ``must_name``, the file it read)."""
    context = f"argv={argv!r}\nstatus={status!r}\nstderr:\n{err}"
    assert "Traceback" not in err, context
    bad = [a for a in args if a.kind == BAD]
    maybe = [a for a in args if a.kind == MAYBE]
    if status == REACHED:
        assert not bad, f"bad input got to the work: {bad}\n{context}"
        return
    assert bad or maybe, f"a valid argument list was refused\n{context}"
    assert status == 2, context
    lines = err.rstrip("\n").splitlines()
    pattern = rf"ondevice-rl {re.escape(command)}( [a-z]+)?: error: \S"
    errors = [line for line in lines if re.match(pattern, line)]
    assert len(errors) == 1 and lines[-1] == errors[0], context
    names = {n for a in bad + maybe for n in a.names}
    assert any(_named(lines[-1], n) for n in names), (
        f"the error names none of {sorted(names)}\n{context}"
    )
    # (The env's own "unknown environment NAME" names the value it was given.)
    named = must_name in lines[-1] or _named(lines[-1], "unknown environment")
    assert named, f"the error does not name {must_name}\n{context}"
    changed = {
        path: (before.get(path), after.get(path))
        for path in before.keys() | after.keys()
        if before.get(path) != after.get(path)
        # A run's lock file stays; whoever takes the lock writes its name there.
        and not (Path(path).name == LOCK and path in before and path in after)
    }
    assert not changed, f"a refused input wrote {sorted(changed)}\n{context}"


# --------------------------------------------------------------------------
# Fixtures: a trained run, and a working directory per example

#: Four updates of 2 envs x 16 steps (episodes end: plot has returns), one
#: epoch of one minibatch: about the quickest run to compile.
TRAIN = (
    "train --env CartPole-v1 --total-timesteps 128 --hidden 8 --num-envs 2 "
    "--num-steps 16 --update-epochs 1 --num-minibatches 1 --segments 1 --seed 3 "
    "--no-progress"
).split()


@pytest.fixture(scope="module")
def trained(tmp_path_factory, suite_cache):
    out = tmp_path_factory.mktemp("fuzz") / "run"
    assert main([*TRAIN, "--out", str(out)]) == 0
    return out, snapshot(out)


@pytest.fixture
def run_dir(trained):
    """The trained run; it must come out of the test unchanged."""
    out, before = trained
    yield out
    assert snapshot(out) == before, "the fuzz changed the trained run"


def workspace(root: Path, run: Path | None = None) -> Path:
    """An example's working directory: a file, an empty directory, a
    directory named like a GIF, one holding a file and, given ``run``, a
    copy of that run (its checkpoints linked: a refused input leaves them
    as they are, which the ``run_dir`` fixture checks)."""
    here = Path(tempfile.mkdtemp(dir=root))
    (here / FILE).write_text("not a directory, not a recipe\n")
    (here / EMPTY).mkdir()
    (here / GIF_DIR).mkdir()
    (here / OLD).mkdir()
    (here / OLD / "notes.txt").write_text("an earlier run\n")
    if run is not None:
        (here / RUN).mkdir()
        for name in ("config.json", "metrics.jsonl", LOCK):
            shutil.copy(run / name, here / RUN / name)
        (here / RUN / "checkpoint").symlink_to(run / "checkpoint")
    return here


def check_call(
    root: Path,
    words: tuple[str, ...],
    args: list[Arg],
    run: Path | None = None,
    prepare: Callable[[Path], None] | None = None,
    must_name: str = "",
) -> object:
    """Runs one example in a fresh working directory and judges it."""
    here = workspace(root, run)
    try:
        if prepare is not None:
            prepare(here)
        argv = tokens(words, args)
        before = snapshot(here)
        with stopped_at_work():
            status, err = run_cli(argv, here)
        judge(words[0], args, status, err, before, snapshot(here), argv, must_name)
        OUTCOMES.append(status)
        return status
    finally:
        shutil.rmtree(here, ignore_errors=True)


SETTINGS = settings(
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=False,
    suppress_health_check=list(HealthCheck),
)


def examples(default: int, slow: int):
    """Parametrizes a test by its example count: the default set, and a
    larger one under ``-m slow``."""
    return pytest.mark.parametrize(
        "count",
        [
            pytest.param(default, id="default"),
            pytest.param(slow, id="slow", marks=pytest.mark.slow),
        ],
    )


#: The exit statuses (or REACHED) of the examples of the running test.
OUTCOMES: list = []


def fuzz(
    count: int, strategy: st.SearchStrategy, body: Callable, both: bool = True
) -> None:
    """``body`` for ``count`` examples of ``strategy``; among them (if
    ``both``), lists that got to the work and lists that were refused."""
    OUTCOMES.clear()
    settings(SETTINGS, max_examples=count)(given(strategy)(body))()
    if both:
        assert REACHED in OUTCOMES and 2 in OUTCOMES, f"one-sided: {OUTCOMES}"


# --------------------------------------------------------------------------
# Config flags: every learner's, from its config's fields

#: Valid values of a learner's fields that keep any combination valid
#: (batch sizes divisible, at least one update, small networks).
SAFE = {
    "env": ("CartPole-v1",),
    "total_timesteps": ("40960", "5e5"),
    "num_envs": ("8", "16"),
    "num_steps": ("16", "32"),
    "num_minibatches": ("1", "2", "4"),
    "update_epochs": ("1", "2"),
    "hidden": ("8", "16,16", "8 8"),
    "memory_size": ("8", "16"),
}
MAYBE_INTS = ("1", "3", "100000")
CONTINUOUS = ("sac", "td3")  # their default env is Pendulum-v1


def config_flags(algo: str, only: tuple[str, ...] | None = None) -> dict[str, Flag]:
    """``train``'s flags of ``algo``'s config fields (or of ``only``)."""
    import dataclasses

    algorithm = get_algorithm(algo)
    config = algorithm.config
    # A size refused beside the others may be named by its partner.
    sizes = tuple(
        f.name
        for f in dataclasses.fields(config)
        if isinstance(f.default, int) and not isinstance(f.default, bool)
    )
    flags = {}
    for field in dataclasses.fields(config):
        name, default = field.name, field.default
        if only is not None and name not in only:
            continue
        flag = "--" + name.replace("_", "-")
        if isinstance(default, bool):
            flags[flag] = Flag(switch=True, negatable=True)
        elif name == "env":
            env = "Pendulum-v1" if algo in CONTINUOUS else "CartPole-v1"
            flags[flag] = Flag(
                good=(env,),
                maybe=("Acrobot-v1", "MountainCarContinuous-v0"),
                bad=("", "Nope-v0", "cartpole-v1", f"{env} "),
                names=("environment",),
                value_named=True,
            )
        elif isinstance(default, int):
            zero = name in config.ZERO_ALLOWED
            good = SAFE.get(name, (str(default),))
            bad = NOT_INT + ("-1", "-2147483649") + (() if zero else ("0",))
            if name == "total_timesteps":
                bad += ("100", "1e15", "1e300")
            else:
                bad += ("2147483648", "1e18")
            maybe = MAYBE_INTS + ("0",) * zero
            flags[flag] = Flag(good=good, bad=bad, maybe=maybe, names=sizes)
        elif isinstance(default, float):
            valid = config.RANGES.get(name)
            bad = NOT_FLOAT + NONFINITE + ("1e39", "-1e39")
            good = (repr(default),)
            if valid is not None:
                if valid.low > -math.inf:
                    bad += (repr(valid.low - 1),)
                    good += () if valid.low_open else (repr(valid.low),)
                if valid.high < math.inf:
                    bad += (repr(valid.high + 0.5),)
                    good += () if valid.high_open else (repr(valid.high),)
            flags[flag] = Flag(good=good, bad=bad, maybe=("1e-30", "0", "1", "-1"))
        elif isinstance(default, tuple):
            flags[flag] = Flag(
                good=SAFE["hidden"],
                bad=("", "0", "-1", "a", "8,,x", "2147483648", "1.5", "8,0"),
                maybe=("100000",),
            )
        else:
            choices = config.CHOICES.get(name)
            if choices is None:
                choices = (default,)
                bad = ("", "bogus")
            else:
                bad = ("", "bogus", choices[0].upper())
            flags[flag] = Flag(good=tuple(choices), bad=bad)
    return flags


# --------------------------------------------------------------------------
# train

RUN_FLAGS = {
    "--seed": Flag(
        good=("0", "3", "4294967295", "5e2"),
        bad=NOT_INT + NEGATIVE + ("4294967296", "1e18"),
    ),
    "--segments": Flag(
        good=("1", "2", "20"), bad=NOT_INT + ("0", "-1"), maybe=("1e18",)
    ),
    "--checkpoint-every": Flag(good=("1", "7"), bad=NOT_INT + ("0", "-2")),
    "--eval-every": Flag(good=("1", "4"), bad=NOT_INT + ("0", "-1", "2147483648")),
    "--eval-episodes": Flag(good=("1", "5"), bad=NOT_INT + ("0", "-1", "2147483648")),
    "--log-every": Flag(good=("1", "3"), bad=NOT_INT + ("0", "-1", "2147483648")),
    "--out": Flag(
        good=("new", "new/deeper", EMPTY),
        bad=(FILE, f"{FILE}/under", LONG),
        maybe=(OLD, ""),
    ),
    "--resume": Flag(bad=(MISSING, FILE, EMPTY, "", LONG)),
    "--force": Flag(switch=True),
    "--no-progress": Flag(switch=True),
    "--no-compile-cache": Flag(switch=True),
    "--env-param": Flag(
        good=("length=0.5", "gravity=9.8", "max_steps=100"),
        bad=(
            "x=1",
            "length=nan",
            "length=-1",
            "length",
            "=1",
            "length=abc",
            "length=1e308",
            "max_steps=0.5",
            "max_steps=1e10",
            "",
        ),  # fmt: skip
        names=("param",),
        repeat=True,
    ),
    "--wandb": Flag(bad=("", " ")),
    "--algo": Flag(good=("ppo",), bad=("", "bogus", "PPO"), names=("algorithm",)),
    "--recipe": Flag(
        good=("cartpole_ppo",),
        bad=("", "nope", FILE, EMPTY, f"{MISSING}.toml", LONG),
        names=("recipe",),
    ),
}
PPO_FIELDS = (
    "env", "total_timesteps", "num_envs", "num_steps", "num_minibatches",
    "update_epochs", "hidden", "learning_rate", "gamma", "clip_eps", "ent_coef",
    "activation", "lr_schedule", "memory", "normalize_obs", "matmul_precision",
)  # fmt: skip


def train_rules(args: list[Arg]) -> list[Arg]:
    """Combinations the flags' own values do not say."""
    given = given_flags(args)
    if "--eval-episodes" in given and "--eval-every" not in given:
        args = retag(args, "--eval-episodes", BAD, "--eval-every")
    out = given.get("--out")
    if out is not None and out.value in (OLD, "") and out.kind != BAD:
        forced = "--force" in given and given["--force"].kind == GOOD
        args = retag(args, "--out", GOOD if forced else BAD, "--force")
    env = given.get("--env")
    if env is not None and env.value != "CartPole-v1":
        args = [
            a._replace(kind=MAYBE) if a.flag == "--env-param" and a.kind == GOOD else a
            for a in args
        ]
    return args


def _train_check(root, args):
    check_call(root, ("train",), train_rules(args))


@examples(25, 400)
def test_train(tmp_path, count):
    flags = {**RUN_FLAGS, **config_flags("ppo", PPO_FIELDS)}
    fuzz(count, arguments(flags), lambda args: _train_check(tmp_path, args))


@pytest.mark.slow
@pytest.mark.parametrize("algo", algorithms())
def test_train_every_config_field(tmp_path, algo):
    """Each learner's every config flag (``--algo`` given)."""
    flags = config_flags(algo)
    flags["--env-param"] = RUN_FLAGS["--env-param"]
    if algo in CONTINUOUS:
        flags["--env-param"] = flags["--env-param"]._replace(
            good=("max_torque=1.5",), bad=("x=1", "max_torque=nan", "=1")
        )

    def check(args):
        algo_arg = Arg(("--algo", algo), GOOD, ("--algo",), "--algo", algo)
        args = train_rules([algo_arg, *args])
        if algo in CONTINUOUS and "--env" in given_flags(args):
            args = retag(args, "--env-param", MAYBE)
        check_call(tmp_path, ("train",), args)

    fuzz(150, arguments(flags, max_flags=6), check)


# --------------------------------------------------------------------------
# train --resume

RESUME_FLAGS = {
    "--total-timesteps": Flag(
        good=("128", "256", "1.28e2"), bad=NOT_INT + ("0", "-1", "64", "1e300")
    ),
    "--seed": Flag(good=("3",), bad=("4", "-1", "x", "")),
    "--segments": Flag(bad=("4", "0", "x")),
    "--checkpoint-every": Flag(good=("1", "2"), bad=("0", "-1", "x")),
    "--eval-every": Flag(bad=("1", "0", "x")),
    "--log-every": Flag(good=("1",), bad=("2", "0", "x")),
    "--hidden": Flag(good=("8",), bad=("16", "0", "")),
    "--learning-rate": Flag(good=("0.00025",), bad=("1e-3", "nan")),
    "--algo": Flag(good=("ppo",), bad=("dqn", "bogus", ""), names=("algorithm",)),
    "--out": Flag(bad=("new", RUN)),
    "--force": Flag(bad=("",)),  # a switch: given at all, it is refused
    "--recipe": Flag(bad=("cartpole_ppo",)),
    "--wandb": Flag(bad=("proj", "")),
    "--no-progress": Flag(switch=True),
}


def resume_rules(args: list[Arg]) -> list[Arg]:
    return [
        Arg(("--force",), BAD, ("--force",), "--force") if a.flag == "--force" else a
        for a in args
    ]


@examples(12, 120)
def test_train_resume(tmp_path, run_dir, count):
    positional = ("RUN_DIR", Flag(good=(RUN,), bad=(MISSING, FILE, EMPTY, "")))

    def check(args):
        args = [
            a._replace(tokens=("--resume", a.value), names=("--resume", *a.names))
            if a.flag == "RUN_DIR"
            else a
            for a in resume_rules(args)
        ]
        check_call(tmp_path, ("train",), args, run_dir)

    fuzz(count, arguments(RESUME_FLAGS, positional, max_flags=3), check)


# --------------------------------------------------------------------------
# sweep

SPEC_BAD = (
    "", "nan", "inf", "abc", "0", "-1", "1e-3,,2", "uniform:1", "loguniform:0:1",
    "uniform:nan:1", "uniform:2:1", "1e308", "uniform:1:inf",
)  # fmt: skip
SWEEP_FLAGS = {
    "--env": Flag(good=("CartPole-v1",), bad=("", "Nope"), names=("environment",)),
    "--algo": Flag(good=("ppo",), bad=("", "bogus"), names=("algorithm",)),
    "--recipe": Flag(
        good=("cartpole_ppo",), bad=("", "nope", FILE, EMPTY), names=("recipe",)
    ),
    "--seeds": Flag(
        good=("1", "2", "0,3"),
        bad=(
            "0",
            "",
            "abc",
            "1,1",
            "-1",
            "1e3",
            "1,,2",
            "99999999999",
            "4294967296,1",
            "1.5",
        ),  # fmt: skip
    ),
    "--samples": Flag(bad=NOT_INT + ("0", "-1"), maybe=("1", "3", "1e12")),
    "--sample-seed": Flag(good=("0", "7"), bad=NOT_INT + ("-1",)),
    "--learning-rate": Flag(
        good=("1e-3", "1e-4,3e-4"),
        bad=SPEC_BAD,
        maybe=("loguniform:1e-5:1e-2", "uniform:0.1:0.2"),
    ),
    "--gamma": Flag(good=("0.9,0.99",), bad=("1.5", "uniform:0:2", "nan", "-0.1", "x")),
    "--num-envs": Flag(
        good=("4", "4,8"), bad=("0", "", "x", "4,,8", "1.5", "-1", "2147483648")
    ),
    "--hidden": Flag(
        good=("8", "8x8", "8,16x16"), bad=("0x8", "8x", "", "abc", "99999999999")
    ),
    "--activation": Flag(good=("tanh", "tanh,relu"), bad=("", "bogus")),
    "--normalize-obs": Flag(good=("true", "false,true"), bad=("maybe", "")),
    "--env-param": Flag(
        good=("length=0.5,1.0",),
        bad=("x=1", "length=nan", "length", "=1", "length=", "length=-1"),
        maybe=("gravity=uniform:9:10",),
        names=("param", "--samples"),  # a random range needs them
    ),
    "--out": Flag(good=("sweep", EMPTY), bad=(FILE, f"{FILE}/x", LONG), maybe=(RUN,)),
    "--resume": Flag(switch=True),
    "--force": Flag(switch=True),
    "--chunk-size": Flag(good=("1", "8"), bad=NOT_INT + ("0", "-1")),
    "--memory-budget": Flag(
        good=("2G", "512M", "1e9"),
        bad=("", "abc", "-5", "1e999", "2X", "1e400G"),
        maybe=("0", "0.5"),
    ),
    "--top": Flag(good=("1", "10"), bad=NOT_INT + ("0", "-5")),
    "--no-progress": Flag(switch=True),
    "--strategy": Flag(
        good=("pbt", "halving"), bad=("", "grid"), names=("PBT", "halving", "--samples")
    ),
    "--round-updates": Flag(good=("1", "5"), bad=NOT_INT + ("0", "-1")),
    "--score-episodes": Flag(good=("1", "20"), bad=NOT_INT + ("0", "-1")),
    "--fraction": Flag(good=("0.25",), bad=NOT_FLOAT + ("nan", "0", "0.9", "-1")),
    "--resample-prob": Flag(good=("0.5",), bad=NOT_FLOAT + ("nan", "-0.1", "1.5")),
    "--eta": Flag(good=("2", "3"), bad=NOT_INT + ("0", "1")),
    "--min-rounds": Flag(good=("1",), bad=NOT_INT + ("0", "-1")),
    "--brackets": Flag(good=("1",), bad=NOT_INT + ("0",)),
    "--cpu-devices": Flag(good=("1", "4"), bad=NOT_INT + ("0", "-1")),
}
#: Multi-host flags: values of the right kind (a combination may still be
#: refused: ``multi_host_rules``), and wrong ones.
MULTI_HOST = ("--coordinator", "--num-processes", "--process-id")
MULTI_HOST_FLAGS = {
    "--coordinator": Flag(
        good=("localhost:1234", "auto", "", "h:1"),
        bad=("nohostport", "host:", ":1"),
        names=(*MULTI_HOST, "multi-host"),  # the missing ones may come first
    ),
    "--num-processes": Flag(good=("1", "2", "0", "-1"), bad=NOT_INT),
    "--process-id": Flag(good=("0", "1", "-1", "5"), bad=NOT_INT),
}
SWEEP_FLAGS.update(MULTI_HOST_FLAGS)
STRATEGY_FLAGS = {
    "--round-updates": None,
    "--score-episodes": None,
    "--fraction": "pbt",
    "--resample-prob": "pbt",
    "--eta": "halving",
    "--min-rounds": "halving",
    "--brackets": "halving",
}


def sweep_rules(args: list[Arg]) -> list[Arg]:
    given = given_flags(args)
    strategy = given.get("--strategy")
    name = strategy.value if strategy is not None and strategy.kind == GOOD else None
    for flag, owner in STRATEGY_FLAGS.items():
        if flag in given and (name is None or owner not in (None, name)):
            args = retag(args, flag, BAD, "--strategy")
    if name is not None:
        # A search needs members to rank, settings of its own, one program.
        args = retag(args, "--strategy", MAYBE)
        if "--chunk-size" in given:
            args = retag(args, "--chunk-size", BAD, "--strategy")
    if "--samples" in given and given["--samples"].kind != BAD:
        args = retag(args, "--samples", MAYBE)  # needs a random range
    if "--resume" in given:  # no sweep stored in --out
        args = retag(args, "--resume", BAD, "--out", "sweep.json")
        if "--force" in given:
            args = retag(args, "--force", BAD, "--resume")
    out = given.get("--out")
    if out is not None and out.value == RUN:
        forced = "--force" in given and "--resume" not in given
        args = retag(args, "--out", GOOD if forced else BAD, "--force")
    return multi_host_rules(args)


def _multi_host_valid(coordinator, processes, process) -> bool:
    """Whether ``ondevice_rl.devices.distributed`` takes these (None: not given)."""
    coordinator = coordinator or None
    if coordinator is None and processes is None and process is None:
        return True  # one process
    if processes is not None and processes < 1:
        return False
    if process is not None and (process < 0 or (processes or process + 1) <= process):
        return False
    if coordinator == "auto":
        return True  # JAX detects the rest
    return None not in (coordinator, processes, process)


def multi_host_rules(args: list[Arg]) -> list[Arg]:
    """The three flags as one setting: all refused if it is not valid."""
    given = given_flags(args)
    hosts = [given[f] for f in MULTI_HOST if f in given]
    if not hosts or any(a.kind == BAD for a in hosts):
        return args
    value = {f: given[f].value if f in given else None for f in MULTI_HOST}
    counts = [None if v is None else int(v) for v in list(value.values())[1:]]
    if not _multi_host_valid(value["--coordinator"], *counts):
        for arg in hosts:
            args = retag(args, arg.flag, BAD, *MULTI_HOST, "multi-host", "process_id")
    return args


@examples(10, 100)
def test_sweep_multi_host(tmp_path, count):
    """``--coordinator``, ``--num-processes``, ``--process-id`` together."""

    def check(args):
        check_call(tmp_path, ("sweep",), multi_host_rules(args))

    flags = {**MULTI_HOST_FLAGS, "--no-progress": Flag(switch=True)}
    fuzz(count, arguments(flags, max_flags=4, unknown=False), check)


@examples(30, 300)
def test_sweep(tmp_path, run_dir, count):
    def check(args):
        check_call(tmp_path, ("sweep",), sweep_rules(args), run_dir)

    fuzz(count, arguments(SWEEP_FLAGS, max_flags=5), check)


# --------------------------------------------------------------------------
# sweep compare

COMPARE_FLAGS = {
    "--algo": Flag(good=("ppo", "a2c"), bad=("bogus",), names=("algorithm",)),
    "--env": Flag(good=("CartPole-v1", "Acrobot-v1"), bad=("Nope",),
                  names=("environment",)),
    "--recipe": Flag(good=("cartpole_ppo",), bad=("nope", FILE, EMPTY),
                     names=("recipe",)),
    "--total-timesteps": Flag(good=("20000",), bad=NOT_INT + ("0", "-1")),
    "--set": Flag(
        good=("num_envs=8",), bad=("bogus=1", "num_envs=-1", "=", "x"),
        names=("--set",), repeat=True,
    ),
    "--search": Flag(
        good=("learning_rate=loguniform:1e-4:1e-2", "gamma=uniform:0.9:0.99"),
        bad=("x", "learning_rate=abc", "learning_rate=loguniform:0:1", "bogus=1"),
        names=("--search", "field"), repeat=True,
    ),
    "--members": Flag(good=("4", "16"), bad=NOT_INT + ("0", "-1")),
    "--search-seeds": Flag(good=("1", "3"), bad=NOT_INT + ("0", "-1")),
    "--first-seed": Flag(good=("0", "7"), bad=NOT_INT + ("-1",)),
    "--methods": Flag(good=("random,pbt", "halving"), bad=("bogus", "random,,pbt"),
                      names=("method",)),
    "--halving-spend": Flag(good=("length", "slots"), bad=("x",)),
    "--eta": Flag(good=("2",), bad=NOT_INT + ("0", "1")),
    "--min-rounds": Flag(good=("1",), bad=NOT_INT + ("0",)),
    "--brackets": Flag(good=("1",), bad=NOT_INT + ("0",)),
    "--round-updates": Flag(good=("1", "5"), bad=NOT_INT + ("0", "-1")),
    "--score-episodes": Flag(good=("1", "20"), bad=NOT_INT + ("0", "-1")),
    "--eval-episodes": Flag(good=("1", "32"), bad=NOT_INT + ("0", "-1")),
    "--out": Flag(good=("compare", EMPTY)),
    "--no-progress": Flag(switch=True),
    "--cpu-devices": Flag(good=("1",), bad=NOT_INT + ("0", "-1")),
}  # fmt: skip


def compare_rules(args: list[Arg]) -> list[Arg]:
    given = given_flags(args)
    algo, recipe = given.get("--algo"), given.get("--recipe")
    good = (GOOD, MAYBE)
    if algo and recipe and algo.kind in good and recipe.kind in good:
        if algo.value != "ppo":  # the recipe is PPO's
            args = retag(args, "--recipe", BAD, "--algo")
    return args


@examples(10, 100)
def test_sweep_compare(tmp_path, count):
    def check(args):
        check_call(tmp_path, ("sweep", "compare"), compare_rules(args))

    fuzz(count, arguments(COMPARE_FLAGS, max_flags=5), check)


# --------------------------------------------------------------------------
# eval, render, export: a run directory and its flags

RUN_DIR_ARG = Flag(
    good=(RUN,), bad=(MISSING, FILE, EMPTY, "", f"{FILE}/x"), names=("RUN_DIR",)
)
MEMBER = Flag(bad=("0", "best", "x", "-1", ""), names=("member", "sweep"))
SEED = Flag(good=("0", "7"), bad=NOT_INT + ("-1", "4294967296"))
USE_FLAGS = {
    "eval": {
        "--episodes": Flag(
            good=("1", "10", "1e3"),
            bad=NOT_INT + ("0", "-1", "2147483648"),
            maybe=("2147483647",),
        ),
        "--deterministic": Flag(switch=True),
        "--seed": SEED,
        "--member": MEMBER,
    },
    "render": {
        "--out": Flag(
            good=("ep.gif", f"{EMPTY}/ep.gif", "ep.mp4", f"{EMPTY}/../ep.gif"),
            bad=(
                "ep.png",
                "",
                FILE,
                EMPTY,
                GIF_DIR,
                f"{MISSING}/ep.gif",
                f"{FILE}/ep.gif",
                f"{LONG}.gif",
            ),  # fmt: skip
        ),
        "--deterministic": Flag(switch=True),
        "--fps": Flag(good=("1", "30", "1e9"), bad=NOT_INT + ("0", "-1")),
        "--scale": Flag(
            good=("1", "0.5", "4"), bad=NOT_FLOAT + NONFINITE + ("0", "-1", "4.5")
        ),
        "--seed": SEED,
        "--member": MEMBER,
    },
    "export": {
        "--out": Flag(
            good=("policy.bin", f"{EMPTY}/p.bin", FILE),
            bad=(EMPTY, f"{FILE}/x.bin", f"{MISSING}/x.bin", "", LONG),
        ),
        "--platforms": Flag(
            good=("cpu", "cpu,cuda", "tpu, cpu"),
            bad=("", "gpu", ",", "cpu,metal"),
        ),
        "--member": MEMBER,
    },
}


@examples(8, 100)
@pytest.mark.parametrize("command", sorted(USE_FLAGS))
def test_run_dir_commands(tmp_path, run_dir, command, count):
    def check(args):
        check_call(tmp_path, (command,), args, run_dir)

    strategy = arguments(USE_FLAGS[command], ("RUN_DIR", RUN_DIR_ARG), max_flags=3)
    fuzz(count, strategy, check)


# --------------------------------------------------------------------------
# plot

PLOT_FLAGS = {
    "--out": Flag(
        good=("c.png", f"{EMPTY}/c.svg", "c.pdf", FILE),
        bad=("c.xyz", f"{MISSING}/c.png", EMPTY, f"{FILE}/c.png", "", f"{LONG}.png"),
    ),
    "--metric": Flag(
        good=("episode_return",), bad=("", "nope"), maybe=("eval_return",)
    ),
    "--smooth": Flag(good=("ema", "window", "none"), bad=("", "gauss")),
    "--span": Flag(good=("1", "5"), bad=NOT_INT + ("0", "-1")),
    "--band": Flag(good=("minmax", "iqr", "std"), bad=("", "all")),
    "--separate": Flag(switch=True),
    "--top": Flag(good=("1", "3"), bad=NOT_INT + ("0", "-1")),
    "--title": Flag(good=("", "x y", "100%", "{}")),
}
PLOT_PATHS = Flag(
    good=(RUN, f"{RUN} {RUN}"), bad=(MISSING, FILE, EMPTY, "", f"{RUN} {MISSING}")
)


@examples(10, 120)
def test_plot(tmp_path, run_dir, count):
    def check(args):
        args = [  # several run directories: several words, side by side
            a._replace(tokens=tuple(a.value.split(" ")) if a.value else ("",))
            if a.flag == "RUN_DIR"
            else a
            for a in args
        ]
        check_call(tmp_path, ("plot",), args, run_dir)

    fuzz(count, arguments(PLOT_FLAGS, ("RUN_DIR", PLOT_PATHS), max_flags=4), check)


# --------------------------------------------------------------------------
# bench and its parts

BENCH_FLAGS = {
    "--quick": Flag(switch=True),
    "--out": Flag(good=("benchout", EMPTY, ".", ""), bad=(FILE, f"{FILE}/x", LONG)),
    "--json": Flag(switch=True),
    "--cpu-devices": Flag(good=("1", "4"), bad=NOT_INT + ("0", "-1")),
    "--envs": Flag(
        good=("CartPole-v1", "CartPole-v1,Acrobot-v1"),
        bad=("Nope", "CartPole-v1,Nope"),
        maybe=("",),
        names=("environment",),
    ),
    "--batch-sizes": Flag(good=("1,2", "64", "1,,2"), bad=("0", "", "x", "-1")),
    "--compare": Flag(switch=True, negatable=True),
    "--algo": Flag(good=("ppo", "dqn", "sac"), bad=("", "bogus"), names=("algorithm",)),
    "--recipe": Flag(good=("cartpole_ppo",), bad=("", "nope", FILE), names=("recipe",)),
    "--seeds": Flag(good=("1", "1,2"), bad=("0", "", "x")),
    "--timesteps": Flag(good=("4096", "1e5"), bad=("0", "1e300", "x"), maybe=("100",)),
    "--reference": Flag(good=(FILE,), bad=(MISSING, EMPTY, "")),
    "--repeat": Flag(good=("1", "2"), bad=("0", "x")),
    "--host-timesteps": Flag(good=("4096",), bad=("0", "x"), maybe=("100", "1e300")),
    "--suite": Flag(good=("gpu",), bad=("", "cpu")),
    "--algos": Flag(good=("ppo", "ppo,dqn"), maybe=("bogus",)),
    "--references": Flag(good=(EMPTY,), maybe=(MISSING, FILE)),
    "--matmul-precision": Flag(good=("highest", "high", "default"), bad=("", "fp16")),
}
PARTS = (None, "env", "train")  # bench host and launches: their own flags


def bench_rules(part: str | None, args: list[Arg]) -> list[Arg]:
    given = given_flags(args)
    suite = "--suite" in given and given["--suite"].kind == GOOD
    if suite:
        if part is not None:
            args = retag(args, "--suite", BAD)  # the suite runs on its own
        for flag in ("--algos", "--references"):
            if flag in given and given[flag].kind == MAYBE:
                args = retag(args, flag, BAD)
        for flag in ("--algo", "--recipe", "--reference"):
            if flag in given and given[flag].kind == BAD:
                args = retag(args, flag, MAYBE)  # not read by the suite
    host = given.get("--host-timesteps")
    if not suite and host is not None and host.value == "1e300":
        if part in (None, "host"):  # more updates than a run may have
            args = retag(args, "--host-timesteps", BAD)
    recipe = given.get("--recipe")
    if recipe is not None and recipe.kind == GOOD and "--algo" in given:
        args = retag(args, "--algo", MAYBE)  # the recipe's learner is timed
    return args


@st.composite
def bench_lines(draw):
    """``bench [FLAGS] [PART [FLAGS]]``: each flag is bench's and each part's."""
    part = draw(st.sampled_from(PARTS))
    args = draw(arguments(BENCH_FLAGS, max_flags=4, unknown=False))
    split = draw(st.integers(0, len(args))) if part else len(args)
    return part, args, split


@examples(20, 200)
def test_bench(tmp_path, count):
    def check(line):
        part, args, split = line
        args = bench_rules(part, args)
        if part is not None:
            args = [*args[:split], Arg((part,), GOOD, (), part), *args[split:]]
        check_call(tmp_path, ("bench",), args)

    fuzz(count, bench_lines(), check)


HOST_FLAGS = {
    "--envs": Flag(
        good=("CartPole-v1", "CartPole-v1,Acrobot-v1"),
        bad=("Nope-v0", "CartPole-v1,Nope-v0", "", "nomodule:factory"),
        names=("environment",),
    ),
    "--backends": Flag(
        good=("gym-sync", "gym-sync,fused"), bad=("", "nope", "fused,nope")
    ),
    "--port": Flag(good=("CartPole-v1=CartPole-v1",), bad=("x", "=y", "x=")),
    "--algo": Flag(good=("ppo", "a2c"), bad=("dqn", "", "nope")),
    "--num-envs": Flag(good=("4", "16"), bad=NOT_INT + ("0", "-1")),
    "--num-steps": Flag(good=("32", "128"), bad=("0", "x")),
    "--async-batch": Flag(good=("2",), bad=("0", "x", "16")),
    "--timesteps": Flag(good=("4096", "1e5"), bad=("0", "x", "100")),
    "--seeds": Flag(good=("0", "0..3", "1,2"), bad=("", "x", "3..1", "1,1")),
    "--quick": Flag(switch=True),
    "--out": Flag(good=("hostout", EMPTY, "."), bad=(FILE, f"{FILE}/x", LONG)),
    "--json": Flag(switch=True),
}


@examples(10, 150)
def test_bench_host(tmp_path, count):
    def check(args):
        check_call(tmp_path, ("bench", "host"), args)

    fuzz(count, arguments(HOST_FLAGS, max_flags=4), check)


LAUNCHES_FLAGS = {
    "--algo": Flag(
        good=("ppo", "ppo,dqn", "all", "ppo-gru"),
        bad=("", "bogus", ",", "ppo,bogus"),
        names=("learner",),
    ),
    "--recipe": Flag(
        good=("cartpole_ppo", "cartpole_dqn"), bad=("", "nope", FILE), names=("recipe",)
    ),
    "--seeds": Flag(good=("1", "1,4"), bad=("0", "", "x")),
    "--target": Flag(good=("h100", "h200"), bad=("", "nope", FILE, EMPTY)),
    "--reference": Flag(good=("auto", "none"), bad=("x.txt", f"{MISSING}/r.py", FILE)),
    "--json": Flag(switch=True),
}


def launches_rules(args: list[Arg]) -> list[Arg]:
    given = given_flags(args)
    if "--algo" in given and "--recipe" in given:
        for flag in ("--algo", "--recipe"):
            args = retag(args, flag, BAD, "--algo", "--recipe")
    return args


@examples(8, 100)
def test_bench_launches(tmp_path, count):
    def check(args):
        check_call(tmp_path, ("bench", "launches"), launches_rules(args))

    fuzz(count, arguments(LAUNCHES_FLAGS, max_flags=4), check)


# --------------------------------------------------------------------------
# check-env

CHECK_ENV_FLAGS = {
    "--reference": Flag(
        good=("CartPole-v1",),
        bad=("", "Nope-v9", "math:nope", "no_such_module_xyz:f"),
        maybe=("Acrobot-v1", "Blackjack-v1"),
    ),
    "--sync": Flag(
        bad=("math:pi", "math:nope", "no_such_module_xyz:f", "", "x"),
        maybe=("math:floor",),
    ),
    "--num-envs": Flag(
        good=("1", "64"), bad=NOT_INT + ("0", "-1", "2147483648"), maybe=("1e9",)
    ),
    "--num-steps": Flag(
        good=("1", "64"), bad=NOT_INT + ("0", "-1", "2147483648"), maybe=("1e9",)
    ),
    "--reference-steps": Flag(
        good=("1", "2000"), bad=NOT_INT + ("0", "-1"), maybe=("1e12",)
    ),
    "--seed": Flag(good=("0", "4294967295"), bad=NOT_INT + ("-1", "4294967296")),
}
ENV_ARG = Flag(
    good=("CartPole-v1", "Acrobot-v1"),
    bad=("", "Nope", "math:pi", "no_such_module_xyz:make", "math:nope", ":", "a b:c"),
    names=("environment", "NAME_OR_ENTRY"),
)


def check_env_rules(args: list[Arg]) -> list[Arg]:
    given = given_flags(args)
    reference = given.get("--reference")
    if "--sync" in given and reference is None:
        args = retag(args, "--sync", BAD, "--reference")
    if reference is not None and reference.value == "Blackjack-v1":
        if "--sync" not in given:  # no built-in sync for it
            args = retag(args, "--reference", BAD, "--sync")
    return value_named(args, "NAME_OR_ENTRY")


@examples(12, 150)
def test_check_env(tmp_path, count):
    def check(args):
        check_call(tmp_path, ("check-env",), check_env_rules(args))

    fuzz(count, arguments(CHECK_ENV_FLAGS, ("NAME_OR_ENTRY", ENV_ARG)), check)


# --------------------------------------------------------------------------
# seeds

SEEDS_FLAGS = {
    "--keys": Flag(
        good=("100..107", "0..1", "3,5"),
        bad=("", "x", "a..b", "1..0", "-1..3", "1,1", "2147483648", "0..9999", ".."),
    ),
    "--sets": Flag(good=("1",), bad=NOT_INT + ("0", "-1"), maybe=("2", "3")),
    "--set": Flag(
        good=("total_timesteps=100000", "num_envs=8"),
        bad=("bogus=1", "num_envs=-1", "=", "x", "hidden=[0]"),
        names=("--set",),
        repeat=True,
    ),
    "--eval-episodes": Flag(good=("0", "32"), bad=NOT_INT + ("-1",)),
    "--out": Flag(good=("newdir", EMPTY), bad=(FILE, f"{FILE}/x", LONG)),
    "--checkpoint": Flag(switch=True),
    "--round-updates": Flag(bad=NOT_INT + ("0", "-1"), maybe=("4",)),
    "--cpu-devices": Flag(good=("1",), bad=NOT_INT + ("0", "-1")),
    "--no-progress": Flag(switch=True),
}
RECIPE_ARG = Flag(
    good=("cartpole_ppo", "acrobot_dqn"),
    bad=("", "nope", FILE, EMPTY, MISSING + "/r.toml"),
    names=("recipe",),
)


def seeds_rules(args: list[Arg]) -> list[Arg]:
    given = given_flags(args)
    keys = given.get("--keys")
    count = 8 if keys is None else {"0..1": 2, "3,5": 2}.get(keys.value, 8)
    sets = given.get("--sets")
    if sets is not None and sets.kind == MAYBE and count % int(sets.value):
        args = retag(args, "--sets", BAD, "--keys")
    if "--round-updates" in given and "--checkpoint" not in given:
        args = retag(args, "--round-updates", BAD, "--checkpoint")
    return value_named(args, "recipe")


@examples(10, 150)
def test_seeds(tmp_path, count):
    def check(args):
        check_call(tmp_path, ("seeds",), seeds_rules(args))

    fuzz(count, arguments(SEEDS_FLAGS, ("recipe", RECIPE_ARG)), check)


# --------------------------------------------------------------------------
# Recipe files


class Raw(str):
    """TOML text written as is (a date, a bad value)."""


def toml_value(value) -> str:
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return (
        "{"
        + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items())
        + "}"
    )


NAN, INF = float("nan"), float("inf")
DATE = Raw("1979-05-27")
WRONG_TYPES = ("x", [1], {"a": 1}, DATE, True)
#: A recipe's (and config.json's ``config``) fields: good, bad, maybe values.
FIELD_VALUES = {
    "env": (("CartPole-v1",), ("", "Nope-v0", 5, ["CartPole-v1"], None)),
    "total_timesteps": (
        (40960, 5e5),
        (0, -1, 1.5, "4096", NAN, INF, 10**15, 10**300, 100, True, DATE, [4096]),
    ),
    "num_envs": ((4, 8, 4.0), (0, -4, 1.5, "4", 2**31, NAN, True, [4], DATE), (1, 3)),
    "hidden": (
        ([8], [16, 16]),
        ([0], [-1], ["8"], [8.5], [True], 8, "8", [2**31], {"a": 8}),
        ([], [100000]),
    ),
    "learning_rate": ((1e-3, 1), (0, -1e-3, NAN, INF, 1e39, "1e-3", True, [1e-3])),
    "gamma": ((0.5, 0, 1, 0.99), (-0.1, 1.01, NAN, -INF, "0.9", False)),
    "activation": (("relu", "tanh"), ("", "Relu", 1, ["relu"], True)),
    "normalize_obs": ((True, False), (1, "true", 0.0, [True], DATE)),
    "lr_schedule": (("cosine",), ("", "exp", 0)),
}
UNKNOWN_KEYS = ("bogus", "num-envs", "Env", "", "total timesteps", "algorithm")
ALGO_VALUES = (("ppo",), ("", "bogus", 5, ["ppo"], True, {"x": 1}, "PPO", DATE))
ENV_PARAMS = (
    ({"length": 0.5}, {"gravity": 9.8, "max_steps": 100}),
    (
        5,
        "x",
        [1],
        True,
        {"x": 1},
        {"length": NAN},
        {"length": "a"},
        {"length": {"a": 1}},
        {"length": -1},
        {"length": 1e308},
        {"max_steps": 0.5},
        {"length": [1]},
        {"": 1},
    ),  # fmt: skip
)
BROKEN_TOML = (
    b"=", b"[", b"a = ", b"algo = 'ppo'\nalgo = 'ppo'\n", b"\xff\xfe\x00\x01",
    b"env = \"CartPole-v1\"\x00", b"[env_params]\n[env_params]\n", b"hidden = [8,",
    b"env = 'CartPole-v1'\nenv_params = 1\n[env_params]\nlength = 1\n",
)  # fmt: skip


class Recipe(NamedTuple):
    text: bytes
    args: list[Arg]  # the keys, tagged as flags are


def _entry(key: str, kind: str, value) -> tuple[str, Arg]:
    line = f"{json.dumps(key)} = {toml_value(value)}"
    names = (key, *KEY_WORDS.get(key, ()))
    return line, Arg((), kind, names, key, line)


#: What an error about a key may say besides the key.
KEY_WORDS = {"algo": ("algorithm",), "env": ("environment",)}
KEY_WORDS.update({key: ("unknown key",) for key in UNKNOWN_KEYS})


@st.composite
def recipes(draw) -> Recipe:
    if draw(st.integers(0, 6)) == 0:
        text = draw(st.sampled_from(BROKEN_TOML))
        return Recipe(text, [Arg((), BAD, ("TOML", "text file"), "toml")])
    clean = draw(st.booleans())
    entries = []

    def pick(key, pools):
        good, bad = pools[0], pools[1]
        maybe = pools[2] if len(pools) > 2 else ()
        kinds = [GOOD] + [MAYBE] * bool(maybe) + [BAD, BAD] * (not clean)
        kind = draw(st.sampled_from(kinds))
        values = {GOOD: good, BAD: bad, MAYBE: maybe}[kind]
        values = [v for v in values if v is not None]  # TOML has no null
        return _entry(key, kind, draw(st.sampled_from(values)))

    if draw(st.booleans()):
        entries.append(pick("algo", ALGO_VALUES))
    for key in dict.fromkeys(
        draw(st.lists(st.sampled_from(sorted(FIELD_VALUES)), max_size=4))
    ):
        entries.append(pick(key, FIELD_VALUES[key]))
    if not clean and draw(st.integers(0, 3)) == 0:
        entries.append(_entry(draw(st.sampled_from(UNKNOWN_KEYS)), BAD, 1))
    entries = draw(st.permutations(entries))
    lines = [line for line, _ in entries]
    args = [arg for _, arg in entries]
    if draw(st.booleans()):  # env params, last: a table, or a value
        kind = GOOD if clean else draw(st.sampled_from([GOOD, BAD, BAD]))
        table = draw(st.sampled_from(ENV_PARAMS[kind == BAD]))
        if isinstance(table, dict) and draw(st.booleans()):
            lines += ["[env_params]"]
            lines += [f"{json.dumps(k)} = {toml_value(v)}" for k, v in table.items()]
        else:
            lines.append(f"env_params = {toml_value(table)}")
        keys = tuple(table) if isinstance(table, dict) else ()
        args.append(Arg((), kind, ("env_params", "param", *keys), "env_params"))
    text = ("# A fuzzed recipe.\n" + "\n".join(lines) + "\n").encode()
    return Recipe(text, args)


#: Commands that read a recipe file: their words, their other arguments.
RECIPE_COMMANDS = {
    "train": (("train",), ("--out", "new")),
    "sweep": (("sweep",), ("--out", "new")),
    "bench": (("bench", "train"), ("--quick",)),
    "launches": (("bench", "launches"), ()),
}


def recipe_rules(command: str, recipe: Recipe) -> list[Arg]:
    args = recipe.args
    if command in ("bench", "launches"):  # their own step counts replace it
        args = retag(args, "total_timesteps", MAYBE)
    if command != "train":  # [env_params] is a training run's: ignored here
        args = retag(args, "env_params", MAYBE)
    return args


@examples(12, 200)
@pytest.mark.parametrize("command", sorted(RECIPE_COMMANDS))
def test_recipe_files(tmp_path, command, count):
    words, extra = RECIPE_COMMANDS[command]

    def check(recipe: Recipe):
        args = recipe_rules(command, recipe)
        given = Arg(("--recipe", "fuzzed.toml"), GOOD, ("fuzzed.toml",), "--recipe")
        rest = [Arg(extra, GOOD, ())] if extra else []

        def prepare(here: Path) -> None:
            (here / "fuzzed.toml").write_bytes(recipe.text)

        check_call(
            tmp_path, words, [given, *rest, *args], prepare=prepare,
            must_name="fuzzed.toml",
        )  # fmt: skip

    fuzz(count, recipes(), check)


# --------------------------------------------------------------------------
# A run's config.json, edited


class Edit(NamedTuple):
    describe: str
    apply: Callable[[dict], object]  # the new file's content (a dict or text)
    kind: str
    names: tuple[str, ...]


#: config.json's fields: their type(s), whether required, good values.
STORED = {
    "algo": ((str,), False),
    "config": ((dict,), True),
    "hyperparams": ((dict,), True),
    "seed": ((int,), True),
    "env_params": ((dict, type(None)), False),
    "segment_length": ((int,), True),
    "eval_every": ((int, type(None)), False),
    "eval_episodes": ((int,), False),
    "log_every": ((int,), False),
    "devices": ((int, type(None)), False),
}
ODD_VALUES = (None, "x", [], {}, True, 1.5, NAN, INF, -1, 0, 10**30, -(10**30), "")
NOT_JSON = ("", "{", "null", "[]", "1", '"text"', "NaN", '{"seed": }', "\x00")


def _is(value, kinds) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, kinds)


def _top_level_kind(key: str, value) -> str:
    kinds, _ = STORED[key]
    if not _is(value, kinds):
        return BAD
    if value is None:
        return GOOD  # where it is allowed
    if key == "seed":
        return GOOD if 0 <= value < 2**32 else BAD
    if key in ("segment_length", "eval_every", "eval_episodes", "log_every"):
        return BAD if value < 1 else MAYBE
    if key == "algo":
        return GOOD if value == "ppo" else BAD
    if key == "config":
        return MAYBE if value == {} else BAD
    if key == "hyperparams":
        return GOOD if value == {} else BAD
    return MAYBE  # env_params {}


@st.composite
def edits(draw) -> Edit:
    what = draw(st.sampled_from(["drop", "set", "field", "unknown", "whole", "hp"]))
    if what == "whole":
        text = draw(st.sampled_from(NOT_JSON))
        return Edit(f"file {text!r}", lambda info: text, BAD, ("config.json",))
    if what == "unknown":
        return Edit(
            "unknown key", lambda info: {**info, "bogus": 1}, GOOD, ("bogus",)
        )  # other keys (jax, status, ...) are the runner's own notes
    key = draw(st.sampled_from(sorted(STORED)))
    if what == "drop":
        required = STORED[key][1]
        return Edit(
            f"drop {key}",
            lambda info: {k: v for k, v in info.items() if k != key},
            BAD if required else GOOD,
            (key,),
        )
    if what == "set":
        value = draw(st.sampled_from(ODD_VALUES))
        kind = _top_level_kind(key, value)
        return Edit(
            f"{key} = {value!r}",
            lambda info: {**info, key: value},
            kind,
            (key, "config.json") if kind == MAYBE else (key,),  # a mismatch
        )
    if what == "hp":
        name = draw(st.sampled_from(["learning_rate", "gamma", "clip_eps", "bogus"]))
        value = draw(st.sampled_from((0.5, NAN, INF, -1.0, "x", None, True, 1e39)))
        valid = name != "bogus" and _is(value, (int, float)) and math.isfinite(value)
        valid = valid and 0 < value <= 1 and abs(value) < 1e38
        return Edit(
            f"hyperparams.{name} = {value!r}",
            lambda info: {**info, "hyperparams": {**info["hyperparams"], name: value}},
            GOOD if valid else BAD,
            (name,),
        )
    field = draw(st.sampled_from([*sorted(FIELD_VALUES), "bogus"]))
    pools = FIELD_VALUES.get(field, ((), (1,)))  # an unknown field: refused
    pools = dict(zip((GOOD, BAD, MAYBE), pools, strict=False))
    kind = draw(st.sampled_from([k for k, values in pools.items() if values]))
    value = draw(st.sampled_from(pools[kind]))
    if isinstance(value, Raw):
        value = str(value)  # JSON has no dates: a string
    names = (field, *KEY_WORDS.get(field, ()))
    if kind != BAD:  # the checkpoint may not fit the edited config: a
        kind, names = MAYBE, (*names, "config.json")  # mismatch, no one key
    return Edit(
        f"config.{field} = {value!r}",
        lambda info: {**info, "config": {**info["config"], field: value}},
        kind,
        names,
    )


#: The commands that read a run's config.json: words before and after RUN_DIR.
CONFIG_READERS = {
    "resume": (("train", "--resume"), ("--no-progress",)),
    "eval": (("eval",), ()),
    "render": (("render",), ()),
    "export": (("export",), ()),
    "plot": (("plot",), ()),
}


@examples(10, 120)
@pytest.mark.parametrize("command", sorted(CONFIG_READERS))
def test_edited_config_json(tmp_path, run_dir, command, count):
    words, extra = CONFIG_READERS[command]

    def check(edit: Edit):
        kind = MAYBE if command == "plot" else edit.kind  # plot reads labels only
        args = [
            Arg((*words[1:], RUN), GOOD, ()),
            Arg(extra, GOOD, ()),
            Arg((), kind, edit.names, "config.json", edit.describe),
        ]

        def prepare(here: Path) -> None:
            path = here / RUN / "config.json"
            new = edit.apply(json.loads(path.read_text()))
            if isinstance(new, str):
                path.write_text(new)
            else:
                path.write_text(json.dumps(new))

        check_call(
            tmp_path, words[:1], args, run_dir,
            prepare=prepare, must_name="config.json",
        )  # fmt: skip

    fuzz(count, edits(), check, both=command != "plot")  # plot reads labels
