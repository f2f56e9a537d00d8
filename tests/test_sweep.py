"""Sweeps: search specs, populations compiled once, grouping, chunking, CLI,
and sweep directories written by earlier versions.

Programs here are tiny and compiled with XLA's backend optimisation off (a few
times faster to compile on CPU): the process-wide ``DEFAULT_CACHE`` is
switched to that for this module, so the CLI test reuses the programs too.
"""

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from kill_9 import kill_9_when
from suite_flags import FAST

import ondevice_rl
from ondevice_rl import envs
from ondevice_rl.devices.sharding import make_mesh
from ondevice_rl.evaluation import evaluate
from ondevice_rl.train import cli
from ondevice_rl.train.cli import main
from ondevice_rl.train.cli import sweep as sweep_cli
from ondevice_rl.train.kit.registry import trainer_for
from ondevice_rl.train.kit.state import policy_params
from ondevice_rl.train.ppo import PPOConfig, make_train
from ondevice_rl.train.recipes import results
from ondevice_rl.train.recipes.loader import load_recipe
from ondevice_rl.train.services.memory import (
    estimate_member_bytes,
    memory_budget,
    plan_chunks,
)
from ondevice_rl.train.sweep import (
    DEFAULT_CACHE,
    LogUniform,
    SweepSpecError,
    Uniform,
    build_plan,
    member_eval,
    programs,
    report,
    request,
    run_plan,
    run_sweep,
    scores,
    seed_sets,
)
from ondevice_rl.train.sweep.member_eval import EVAL_SALT
from ondevice_rl.train.use.loading import load_run

# Its module-scoped programs are built once: its tests share one xdist worker.
pytestmark = pytest.mark.xdist_group("sweep")

TINY = PPOConfig(
    total_timesteps=2 * 8 * 6,  # 6 updates
    num_envs=2,
    num_steps=8,
    update_epochs=1,
    num_minibatches=1,
    hidden=(8,),
)
SEARCH = {"learning_rate": [1e-3, 3e-2]}
LENGTHS = {"length": [0.5, 1.0]}
#: Directories the sweep engine wrote before it trained every population in
#: rounds (tests/data/sweep_dirs, see ``test_a_sweep_directory_written_before_*``).
OLD_DIRS = Path(__file__).parent / "data" / "sweep_dirs"
CLI_TINY = [
    "--total-timesteps", "96", "--num-envs", "2", "--num-steps", "8",
    "--update-epochs", "1", "--num-minibatches", "1", "--hidden", "8",
    "--no-progress",
]  # fmt: skip


TRACES = []  # static configs, one per trace of a population program


def trace_count() -> int:
    return len(TRACES)


@pytest.fixture(scope="module", autouse=True)
def count_traces():
    """Counts traces of population programs, in or out of the program cache:
    a Python side effect in the ``init`` every population program traces."""
    init_fn = programs.init_fn

    def counted(config, solo_keys=False):
        init = init_fn(config, solo_keys)

        def traced(*args):
            TRACES.append(config)
            return init(*args)

        return traced

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(programs, "init_fn", counted)
        yield


@pytest.fixture(scope="module", autouse=True)
def fast_cache():
    saved = DEFAULT_CACHE.compiler_options
    DEFAULT_CACHE.clear()
    DEFAULT_CACHE.compiler_options = FAST
    yield DEFAULT_CACHE
    DEFAULT_CACHE.clear()
    DEFAULT_CACHE.compiler_options = saved


@pytest.fixture(scope="module")
def base():
    """8 members: 2 learning rates x 2 pole lengths x 2 seeds, one program."""
    before = trace_count()
    result = run_sweep(TINY, seeds=2, search=SEARCH, env_params=LENGTHS)
    assert result.programs_compiled == 1 and trace_count() == before + 1
    return result


@pytest.fixture(scope="module")
def alone():
    """``TINY``'s single-run program (key, hyperparams, env params), compiled
    once (as ``FAST``) for the tests that train one member alone."""
    _, params = envs.make(TINY.env)
    train = jax.jit(make_train(TINY))
    args = (jax.random.key(0), TINY.hyperparams, params)
    return train.lower(*args).compile(compiler_options=FAST), params


def _curves(result, metric="total_loss"):
    return np.stack([result.metrics[m.index][metric] for m in result.plan.members])


# --- search spaces (nothing compiled) ---------------------------------------------


def test_plan_grid_crosses_fields_and_seeds():
    plan = build_plan(TINY, seeds=3, search={**SEARCH, "clip_eps": [0.1, 0.2, 0.3]})
    assert len(plan.members) == 2 * 3 * 3 and plan.num_settings == 6
    assert plan.swept == ("learning_rate", "clip_eps")
    m = plan.members[4]
    assert (m.seed, m.setting) == (1, 1)
    assert m.config.hyperparams.clip_eps == np.float32(0.2)
    assert plan.setting_values(m) == {"learning_rate": 1e-3, "clip_eps": 0.2}
    # One value is a fixed change, not a swept field.
    plan = build_plan(TINY, search={"gamma": [0.9], **SEARCH}, env_params=LENGTHS)
    assert plan.swept == ("learning_rate", "env.length")
    assert all(m.config.gamma == 0.9 for m in plan.members)


def test_plan_random_draws_are_in_range_and_reproducible():
    search = {"learning_rate": LogUniform(1e-5, 1e-2), "num_envs": [2, 4]}
    env = {"length": Uniform(0.25, 1.0)}
    a = build_plan(TINY, 2, search, env, samples=5, sample_seed=7)
    b = build_plan(TINY, 2, search, env, samples=5, sample_seed=7)
    c = build_plan(TINY, 2, search, env, samples=5, sample_seed=8)
    assert len(a.members) == 2 * 5 * 2 and a == b and a != c
    lrs = {m.config.learning_rate for m in a.members}
    assert len(lrs) == 5 and all(1e-5 <= lr <= 1e-2 for lr in lrs)
    lengths = [dict(m.env_params)["length"] for m in a.members]
    assert all(0.25 <= x <= 1.0 for x in lengths)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"search": {"learning_rte": [1e-3]}}, "did you mean learning_rate"),
        ({"search": {"env": ["Pendulum-v1"]}}, "env cannot be swept"),
        ({"search": {"gamma": [1.5]}}, r"gamma=1.5 is outside"),
        ({"search": {"learning_rate": [0.0]}}, "learning_rate=0.0 is outside"),
        ({"search": {"learning_rate": LogUniform(1e-5, 1e-2)}}, "need a number"),
        ({"search": SEARCH, "samples": 4}, "no uniform/loguniform"),
        ({"search": {"num_envs": Uniform(1, 8)}, "samples": 2}, "sets shapes"),
        ({"search": {"num_minibatches": [5]}}, "not divisible"),
        ({"search": {"activation": ["sigmoid"]}}, "unknown activation"),
        ({"env_params": {"lenght": [1.0]}}, "did you mean length"),
        ({"env_params": {"max_steps": [1.5]}}, "must be an integer"),
        ({"seeds": [1, 1]}, "repeated seeds"),
        ({"seeds": 0}, "seeds must be >= 1"),
    ],
)
def test_plan_errors_are_one_line(kwargs, message):
    with pytest.raises(SweepSpecError, match=message) as err:
        build_plan(TINY, **{"seeds": 1, **kwargs})
    assert "\n" not in str(err.value)


def test_distributions_reject_bad_bounds():
    with pytest.raises(SweepSpecError):
        LogUniform(0.0, 1.0)
    with pytest.raises(SweepSpecError):
        Uniform(2.0, 1.0)


def test_plan_chunks_equal_sizes_multiple_of_devices():
    assert plan_chunks(256, 1000, 1) == (256, 1)
    assert plan_chunks(256, 100, 1) == (86, 3)  # 3 equal chunks, 2 members padded
    assert plan_chunks(10, 4, 4) == (4, 3)
    assert plan_chunks(10, 1, 4) == (4, 3)  # never below one member per device
    assert plan_chunks(5, 100, 4) == (8, 1)  # padded to the device count
    assert plan_chunks(10, 100, 1, chunk_size=3) == (3, 4)


def test_scores():
    s = scores(np.arange(20.0))
    assert s == {"final_return": 14.5, "last10pct_return": 18.5, "auc": 9.5}


# --- populations --------------------------------------------------------------------


def test_swept_values_change_results(base):
    losses = _curves(base)
    by_seed = {}
    for m in base.plan.members:
        by_seed.setdefault(m.seed, []).append(losses[m.index])
    for curves in by_seed.values():  # same seed, different lr / length
        for i in range(1, len(curves)):
            assert not np.allclose(curves[0], curves[i])
    assert np.all(np.isfinite(losses))


def test_new_values_reuse_the_compiled_program(base):
    traces = trace_count()
    again = run_sweep(
        TINY,
        seeds=[5, 6],
        search={"clip_eps": [0.1, 0.3], "gamma": [0.9, 0.95]},
    )
    assert again.programs_compiled == 0 and trace_count() == traces
    # A smaller population reuses it too (padded: at most half the work wasted).
    fewer = run_sweep(TINY, seeds=3, search={"ent_coef": [0.0, 0.02]})
    assert fewer.programs_compiled == 0 and trace_count() == traces
    assert fewer.groups[0].chunk_size == 8 and len(fewer.finished) == 6
    assert not np.allclose(_curves(again), _curves(base))


def test_member_matches_the_same_run_trained_alone(base, alone):
    m = base.plan.members[5]
    assert dict(m.env_params) and m.config.learning_rate != TINY.learning_rate
    # Its config is TINY but for traced values: TINY's program trains it.
    assert m.config.replace(learning_rate=TINY.learning_rate) == TINY
    train, params = alone
    params = params._replace(**dict(m.env_params))
    args = (jax.random.key(m.seed), m.config.hyperparams, params)
    alone = train(*args).metrics
    for name, values in alone.items():
        np.testing.assert_allclose(
            base.metrics[m.index][name][:3], np.asarray(values)[:3],
            rtol=1e-4, atol=1e-5, err_msg=name,
        )  # fmt: skip


def test_static_fields_compile_once_per_group(base):
    traces = trace_count()
    search = {"num_envs": [2, 4], "learning_rate": [1e-3, 1e-2]}
    result = run_sweep(TINY, seeds=2, search=search)
    assert [g.config.num_envs for g in result.groups] == [2, 4]
    assert [g.members for g in result.groups] == [4, 4]
    # num_envs=2 is the base program (cached); num_envs=4 compiles once.
    assert [g.compiled for g in result.groups] == [False, True]
    assert result.programs_compiled == 1 and trace_count() == traces + 1
    assert run_sweep(TINY, seeds=2, search=search).programs_compiled == 0
    wide = result.metrics[result.plan.members[-1].index]["episode_return"]
    assert wide.shape == (TINY.total_timesteps // (4 * 8),)


def test_chunked_equals_unchunked_and_budget_picks_chunks(base):
    chunked = run_plan(base.plan, chunk_size=3)
    assert (chunked.groups[0].chunk_size, chunked.groups[0].num_chunks) == (3, 3)
    np.testing.assert_allclose(_curves(chunked), _curves(base), rtol=1e-5, atol=1e-6)
    # A budget of 3 estimated members per device selects the same chunking.
    budget = 3 * estimate_member_bytes(TINY) + 1
    auto = run_plan(base.plan, memory_budget_bytes=budget)
    assert auto.programs_compiled == 0
    assert (auto.groups[0].chunk_size, auto.groups[0].num_chunks) == (3, 3)
    np.testing.assert_allclose(_curves(auto), _curves(base), rtol=1e-5, atol=1e-6)


def test_estimate_is_conservative(base):
    group = base.groups[0]
    per_member_xla = group.program_bytes / group.chunk_size
    assert per_member_xla <= group.estimated_bytes_per_member < 20 * per_member_xla


def test_interrupt_keeps_finished_members(base):
    def stop_after_first(result, group, chunk):
        raise KeyboardInterrupt

    partial = run_plan(base.plan, chunk_size=3, on_chunk=stop_after_first)
    assert partial.interrupted and len(partial.finished) == 3
    assert [r["member"] for r in partial.rows()] == [0, 1, 2]
    for m in partial.finished:
        np.testing.assert_allclose(
            partial.metrics[m.index]["total_loss"], base.metrics[m.index]["total_loss"],
            rtol=1e-5, atol=1e-6,
        )  # fmt: skip


def test_first_ctrl_c_finishes_the_running_chunk_then_stops(
    base, capsys, default_sigint
):
    def press_ctrl_c(result, group, chunk):
        signal.raise_signal(signal.SIGINT)  # as if pressed during this chunk

    partial = run_plan(base.plan, chunk_size=3, on_chunk=press_ctrl_c)
    assert partial.interrupted and len(partial.finished) == 3
    assert "stopping after the running chunk" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_result_table_ranking_curves_and_files(base, tmp_path):
    rows = base.rows()
    assert len(rows) == 8
    assert {"seed", "learning_rate", "env.length", "final_return", "last10pct_return",
            "auc"} <= set(rows[0])  # fmt: skip
    ranking = base.ranking()
    assert len(ranking) == 4 and all(len(s.seeds) == 2 for s in ranking)
    means = [s.last10pct_mean for s in ranking]
    assert means == sorted(means, reverse=True) and base.best == ranking[0]
    steps, returns = base.curves()[ranking[0].setting]
    assert returns.shape == (2, TINY.num_updates) and steps[-1] == 96
    paths = report.write_outputs(base, tmp_path)
    assert all(p.exists() and p.stat().st_size > 0 for p in paths)
    with (tmp_path / "sweep.csv").open() as f:
        assert len(list(csv.DictReader(f))) == 8
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["best"]["last10pct_mean"] == pytest.approx(ranking[0].last10pct_mean)


def test_memory_budget_is_positive():
    assert memory_budget(make_mesh()) > 0


# --- CLI ------------------------------------------------------------------------


def test_cli_sweep_writes_files_and_ranking(base, tmp_path, capsys):
    out = tmp_path / "sweep"
    argv = ["sweep", "--seeds", "2", "--learning-rate", "1e-3,3e-2",
            "--env-param", "length=0.5,1.0", "--out", str(out), *CLI_TINY]  # fmt: skip
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "learning_rate" in printed and "best:" in printed
    assert "0 program(s) compiled" in printed  # reused the fixture's program
    for name in ("sweep.csv", "ranking.csv", "curves.png", "curves.npz",
                 "summary.json"):  # fmt: skip
        assert (out / name).stat().st_size > 0, name
    with (out / "sweep.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 8
    got = sorted(float(r["final_return"]) for r in rows)
    want = sorted(r["final_return"] for r in base.rows())
    np.testing.assert_allclose(got, want, rtol=1e-4)
    summary = json.loads((out / "summary.json").read_text())
    assert isinstance(summary["best"]["values"]["learning_rate"], float)
    assert summary["best_member"] == base.best_member
    assert isinstance(summary["best"]["last10pct_iqm"], float)
    kept_members_act_like_the_population(base, out, capsys)


def kept_members_act_like_the_population(base, out, capsys):
    """Each member's final parameters are kept: load_policy, eval and render
    take the sweep directory with a member (its number or "best")."""
    best = base.best_member
    run = load_run(out, member="best")
    assert run.member == best and run.step == TINY.num_updates
    assert run.spec.config.learning_rate == base.plan.members[best].config.learning_rate
    assert dict(base.plan.members[best].env_params) == run.spec.env_params
    for got, want in zip(
        jax.tree.leaves(run.params), jax.tree.leaves(base.params[best]), strict=True
    ):
        np.testing.assert_array_equal(np.asarray(got), want)
    policy = ondevice_rl.load_policy(out, member=3)
    assert policy.run.member == 3 and policy(np.zeros(4, np.float32)).shape == ()
    argv = ["eval", str(out), "--member", "best", "--episodes", "4", "--deterministic"]
    assert cli.main(argv) == 0
    assert f"sweep member {best} after" in capsys.readouterr().out
    record = json.loads((out / f"eval-member-{best}.json").read_text())
    assert record["member"] == best and len(record["episode_returns"]) == 4
    assert cli.main(["render", str(out), "--member", "3", "--deterministic"]) == 0
    assert "frames" in capsys.readouterr().out
    assert (out / "episode-member-3.gif").stat().st_size > 0
    assert cli.main(["export", str(out), "--member", "3", "--platforms", "cpu"]) == 0
    exported = jax.export.deserialize((out / "policy-member-3.bin").read_bytes())
    obs = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    want = np.stack([np.asarray(policy(o)) for o in obs])
    np.testing.assert_array_equal(np.asarray(exported.call(obs)), want)
    for argv, message in [
        (["eval", str(out)], "choose a member"),
        (["eval", str(out), "--member", "99"], "no parameters of member 99"),
        (["eval", str(out), "--member", "worst"], "a member's number or 'best'"),
        (["export", str(out), "--member", "99"], "no parameters of member 99"),
    ]:
        assert cli.main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err, err


def test_a_diverging_member_is_flagged_and_costs_nothing_else(base, tmp_path):
    """A learning rate of 1e30 sends its members' parameters to inf/NaN: they
    are flagged and left out of the ranking; the others are the numbers the
    same members have in a population without them (one compiled program)."""
    result = run_sweep(
        TINY, seeds=2, search={"learning_rate": [1e-3, 1e30]}, env_params=LENGTHS
    )
    assert result.programs_compiled == 0
    bad = {m.index for m in result.plan.members if m.config.learning_rate > 1}
    assert set(result.nonfinite) == bad
    assert all(result.params_finite[i] is False for i in bad)
    assert {s.values["learning_rate"] for s in result.ranking()} == {1e-3}
    assert result.best_member not in bad
    for m in result.plan.members:
        if m.index not in bad:  # lr 1e-3: the base population's first members
            np.testing.assert_array_equal(
                result.metrics[m.index]["total_loss"],
                base.metrics[m.index]["total_loss"],
            )
    rows = {r["member"]: r for r in result.rows()}
    assert all(rows[i]["nonfinite"].startswith("non-finite") for i in bad)
    assert set(report.summary(result)["nonfinite"]) == {str(i) for i in bad}


def test_sweep_takes_a_recipe_as_its_base(tmp_path):
    """``sweep --recipe``: the recipe's settings are the base config; flags
    sweep over it; sweep.json keeps both (nothing compiled here)."""
    argv = ["sweep", "--recipe", "cartpole_dqn", "--learning-rate", "1e-3,1e-4",
            "--out", str(tmp_path)]  # fmt: skip
    args = cli.build_parser(argv).parse_args(argv)
    spec = sweep_cli._read_args(args)
    asked = sweep_cli._request(args, spec)
    plan = request.plan_of(asked)
    recipe = load_recipe("cartpole_dqn")
    assert asked["algo"] == "dqn" and asked["recipe"] == "cartpole_dqn"
    assert plan.base == recipe and len(plan.members) == 2
    assert plan.members[1].config == recipe.replace(learning_rate=1e-4)
    stored = json.loads(json.dumps(asked, default=str))
    assert request.plan_of(stored).members == plan.members  # as sweep.json reads
    argv = ["sweep", "--recipe", "cartpole_dqn", "--algo", "ppo"]
    assert cli.main(argv) == 2


def test_cli_random_search(base, tmp_path, capsys):
    argv = ["sweep", "--seeds", "2", "--learning-rate", "loguniform:1e-4:1e-2",
            "--samples", "3", "--out", str(tmp_path), *CLI_TINY]  # fmt: skip
    assert cli.main(argv) == 0
    assert "0 program(s) compiled" in capsys.readouterr().out
    with (tmp_path / "ranking.csv").open() as f:
        assert len(list(csv.DictReader(f))) == 3


@pytest.mark.parametrize(
    "args, message",
    [
        (["--learning-rate", "abc"], "cannot read 'abc' as a number"),
        (["--learning-rate", "loguniform:1e-5"], "loguniform:LOW:HIGH"),
        (["--learning-rate", "loguniform:1e-2:1e-5", "--samples", "2"], "low < high"),
        (["--clip-eps", "uniform:0.1:0.3"], "--samples N"),
        (["--num-envs", "4.5"], "expected integers"),
        (["--hidden", "64-64"], "widths like 64x64"),
        (["--env-param", "length"], "NAME=SPEC"),
        (["--env-param", "lenght=1"], "did you mean length"),
        (["--env", "CartPol-v1"], "unknown environment"),
        (["--seeds", "x"], "--seeds"),
        (["--memory-budget", "lots"], "--memory-budget"),
        (["--coordinator", "h:1"], "missing --num-processes"),
    ],
)
def test_cli_bad_specs_exit_2_with_one_line(args, message, capsys):
    assert cli.main(["sweep", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ondevice-rl sweep: error:") and message in err
    assert "\n" not in err


def test_cli_interrupt_writes_finished_members(base, tmp_path, monkeypatch, capsys):
    calls = []
    original = programs.Program.__call__

    def interrupt_second_chunk(self, *inputs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return original(self, *inputs)

    monkeypatch.setattr(programs.Program, "__call__", interrupt_second_chunk)
    argv = ["sweep", "--seeds", "2", "--learning-rate", "1e-3,3e-2",
            "--env-param", "length=0.5,1.0", "--chunk-size", "3",
            "--out", str(tmp_path), *CLI_TINY]  # fmt: skip
    assert cli.main(argv) == 130
    assert "interrupted: wrote 3 of 8 members" in capsys.readouterr().err
    with (tmp_path / "sweep.csv").open() as f:
        assert len(list(csv.DictReader(f))) == 3


def test_a_sweep_directory_written_before_resumes_and_loads(base, tmp_path, capsys):
    """``OLD_DIRS / "grid"``: ``sweep --seeds 2 --learning-rate 1e-3,3e-2
    --env-param length=0.5,1.0 --chunk-size 3 *CLI_TINY`` as an earlier
    version wrote it. Its last chunk taken away, ``sweep --resume`` trains
    those members again (in the stored chunk size) and writes the tables the
    earlier version wrote; its members load, and ``plot`` reads it."""
    out = tmp_path / "grid"
    shutil.copytree(OLD_DIRS / "grid", out)
    policy = ondevice_rl.load_policy(out, member="best")  # as it was kept
    assert (
        policy.run.member
        == json.loads((out / "summary.json").read_text())["best_member"]
    )
    tables = {name: (out / name).read_text() for name in ("sweep.csv", "ranking.csv")}
    for name in ("chunk-6-2.npz", "params-6-2.npz", "sweep.csv", "ranking.csv"):
        (out / name if name.endswith("csv") else out / "members" / name).unlink()
    argv = ["sweep", "--resume", "--out", str(out), "--no-progress"]
    assert cli.main(argv) == 0
    assert "resuming: 6 member(s) already trained" in capsys.readouterr().err
    for name, text in tables.items():
        assert (out / name).read_text() == text, name
    assert load_run(out, member=7).spec.seed == 1
    assert cli.main(["plot", str(out), "--out", str(tmp_path / "curves.png")]) == 0
    assert (tmp_path / "curves.png").stat().st_size > 0


# --- slow ---------------------------------------------------------------------------


@pytest.mark.slow
def test_population_of_256_cartpole_members_on_cpu():
    """64 random learning rates x 4 seeds, default network, one program."""
    DEFAULT_CACHE.compiler_options = None  # full optimisation: this one runs long
    try:
        result = run_sweep(
            PPOConfig(total_timesteps=32_768),
            seeds=4,
            search={"learning_rate": LogUniform(1e-4, 3e-3)},
            samples=64,
        )
    finally:
        DEFAULT_CACHE.compiler_options = FAST
    assert len(result.finished) == 256 and not result.interrupted
    assert result.programs_compiled == 1
    assert result.best.last10pct_mean > 100.0


def test_seed_sets_state_iqm_ci_and_worst_seed_per_set(
    base, alone, tmp_path, capsys, monkeypatch
):
    """``ondevice-rl seeds``' engine: a recipe over disjoint sets of seeds
    (here TINY, 2 sets of 4: the fixture's program)."""
    traces = []
    plain_evaluate = member_eval.evaluate  # called once per evaluator trace
    monkeypatch.setattr(
        member_eval, "evaluate", lambda *a: traces.append(1) or plain_evaluate(*a)
    )
    record = seed_sets.measure(TINY, range(10, 18), sets=2, eval_episodes=3)
    assert [r["seeds"] for r in record["sets"]] == [
        "seeds 10-13", "seeds 14-17", "all 8 seeds"
    ]  # fmt: skip
    first, second, everything = record["sets"]
    assert (
        everything["final_returns"] == first["final_returns"] + second["final_returns"]
    )
    for r in record["sets"]:
        values = np.asarray(r["final_returns"])
        assert r["worst"]["final_return"] == values.min()
        assert r["ci"][0] <= r["iqm"] <= r["ci"][1] and r["n"] == len(values)
    assert "| seeds 10-13 | 4 |" in seed_sets.table(record)
    # Seed 10's deterministic evaluation: its policy trained alone, played
    # from the evaluation key.
    trainer = trainer_for(TINY)
    train, env_params = alone
    state = train(jax.random.key(10), TINY.hyperparams, env_params).state
    key = jax.random.fold_in(jax.random.key(10), EVAL_SALT)
    played = jax.jit(
        lambda p, k: evaluate(trainer.policy, p, trainer.env, None, k, 3, True)
    )(policy_params(state), key)["return"].mean()
    assert first["eval_returns"][0] == pytest.approx(float(played), rel=1e-6)
    assert everything["eval_returns"] == first["eval_returns"] + second["eval_returns"]
    for r in record["sets"]:
        values = np.asarray(r["eval_returns"])
        assert r["eval"]["worst"]["eval_return"] == values.min()
        assert r["eval"]["ci"][0] <= r["eval"]["iqm"] <= r["eval"]["ci"][1]
    assert "IQM deterministic evaluation (3 episodes)" in seed_sets.table(record)
    _recipes_page_states_the_record(record, tmp_path)
    _the_seeds_command_states_the_same(record, tmp_path, capsys)
    # --checkpoint: the same members trained in checkpointed rounds end with
    # the same numbers; run again, it resumes from the last round, trains
    # nothing and states the same.
    where = tmp_path / "checkpointed"
    for resumed_from in (0, 3):
        rounds = seed_sets.measure(
            TINY, range(10, 18), 2, 3, where, round_updates=2, progress=True
        )
        assert rounds["sets"] == record["sets"]
        assert rounds["resumed_from"] == resumed_from
    # Its progress lines name the seed sets, not the search they run on.
    lines = capsys.readouterr().err.splitlines()
    assert any(line.startswith("seed sets: 3/3 rounds") for line in lines), lines
    assert not any("search" in line for line in lines), lines
    assert sorted(p.name for p in (where / "search").iterdir()) == [
        "round-2", "round-3"
    ]  # fmt: skip
    # The four measurements above (the command's included) evaluated their
    # members with one program, traced once.
    assert len(traces) <= 1


def _the_seeds_command_states_the_same(record, tmp_path, capsys):
    """``ondevice-rl seeds FILE --keys 10..17 --sets 2``: the same record
    (the same program, from the population cache), its table printed."""
    fields = {"algo": "ppo", **TINY.to_dict()}
    recipe = tmp_path / "tiny.toml"
    recipe.write_text(
        "".join(f"{k} = {json.dumps(v)}\n" for k, v in fields.items() if v is not None)
    )
    out = tmp_path / "seeds"
    argv = ["seeds", str(recipe), "--keys", "10..17", "--sets", "2"]
    argv += ["--eval-episodes", "3", "--cpu-devices", "1", "--no-progress"]
    same = f"learning_rate={TINY.learning_rate!r}"  # a change that changes nothing
    capsys.readouterr()
    assert main([*argv, "--set", same, "--out", str(out)]) == 0
    stored = json.loads((out / "seed_sets.json").read_text())
    assert stored["sets"] == record["sets"] and stored["keys"] == "10..17"
    assert stored["changes"] == [same] and "changes" not in record
    printed = capsys.readouterr().out
    assert printed.startswith(seed_sets.table(record))
    assert (out / "seed_sets.md").read_text() == seed_sets.table(record)
    with np.load(out / "curves.npz") as curves:
        returns = curves["seed_13_episode_return"]
        assert len(returns) == TINY.num_updates and "seed_17_value_loss" in curves
    assert record["sets"][0]["final_returns"][3] == scores(returns)["final_return"]


def _recipes_page_states_the_record(record, tmp_path):
    """``make recipe-seeds``'s last step: the recipes page's table, rebuilt
    from the ``NAME_seeds.json`` records between its markers."""
    docs = tmp_path / "results"
    docs.mkdir()
    (docs / "tiny_seeds.json").write_text(json.dumps(record))
    page = tmp_path / "recipes.md"
    page.write_text("intro\n<!-- seeds:start -->\nold\n<!-- seeds:end -->\nrest\n")
    args = ["--docs", str(docs), "--recipes-page", str(page), "--seeds-table"]
    assert results.main(args) == 0
    text = page.read_text()
    assert text.startswith("intro\n<!-- seeds:start -->\n| recipe |")
    assert "old" not in text and text.endswith("<!-- seeds:end -->\nrest\n")
    (row,) = [line for line in text.splitlines() if line.startswith("| `tiny`")]
    everything = record["sets"][-1]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:3] == [f"{TINY.total_timesteps:,}", "10–17 (8)"]
    number, worst = seed_sets.number, everything["worst"]
    assert cells[3].startswith(number(everything["iqm"]) + " [")
    assert cells[4] == f"{number(worst['final_return'])} (seed {worst['seed']})"
    assert cells[5] == " / ".join(number(r["iqm"]) for r in record["sets"][:2])
    assert cells[6].endswith("; 3 episodes") and cells[7] == "–"
    page.write_text("no markers\n")
    with pytest.raises(ValueError, match="no <!-- seeds:start -->"):
        results.main(args)


@pytest.mark.slow
def test_seed_sets_checkpoint_resumes_after_kill_9_to_the_same_record(tmp_path):
    """``seeds --checkpoint`` killed with SIGKILL mid-run, then the same
    command again: the record equals the uninterrupted run's."""
    cli = "import sys; from ondevice_rl.train.cli import main; sys.exit(main())"

    def command(out):
        return [
            sys.executable, "-c", cli, "seeds", "cartpole_ppo", "--keys", "0..1",
            "--set", "total_timesteps=40960", "--set", "num_envs=4",
            "--set", "num_steps=32", "--set", "hidden=[16]", "--eval-episodes", "2",
            "--checkpoint", "--round-updates", "8", "--out", str(out),
        ]  # fmt: skip

    env = dict(os.environ, JAX_PLATFORMS="cpu")

    def finished(out):
        proc = subprocess.run(command(out), env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        return json.loads((out / "seed_sets.json").read_text())

    whole = finished(tmp_path / "whole")
    cut = tmp_path / "cut"
    proc = subprocess.Popen(command(cut), env=env, stderr=subprocess.DEVNULL)
    kill_9_when(proc, cut / "search" / "round-10")
    assert not (cut / "seed_sets.json").exists()  # killed mid-run
    resumed = finished(cut)
    assert resumed["resumed_from"] >= 10
    assert resumed["sets"] == whole["sets"]
