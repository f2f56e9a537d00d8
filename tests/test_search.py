"""Searches between rounds (train/sweep/engine.py, rounds.py, pbt.py,
halving.py): PBT's exploit/explore and successive halving's refills on the
device, scores, lineage, fault isolation, exact resume, compile counts, the
CLI (``sweep --strategy``, ``sweep compare``), and a search directory written
by an earlier version.

One tiny PPO population (2 seeds x 4 members, 3 rounds of 2 updates) serves
every test: its programs are compiled once, with XLA's backend optimisation
off, in the process's program cache (as tests/test_sweep.py does).
"""

import csv
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from kill_9 import kill_9_when
from suite_flags import FAST

import ondevice_rl
from ondevice_rl.devices.sharding import make_mesh
from ondevice_rl.train import cli
from ondevice_rl.train.kit.registry import algorithms, get_algorithm
from ondevice_rl.train.ppo import PPOConfig
from ondevice_rl.train.run.artifacts import RunDirError
from ondevice_rl.train.services.memory import estimate_member_bytes
from ondevice_rl.train.sweep import (
    DEFAULT_CACHE,
    PBT,
    Halving,
    LogUniform,
    SweepSpecError,
    build_plan,
    check_plan,
    checkpoints,
    compare,
    population,
    programs,
    run_sweep,
    space,
)
from ondevice_rl.train.sweep.engine import round_lengths
from ondevice_rl.train.sweep.halving import rung_ages
from ondevice_rl.train.sweep.pbt import copy_rows
from ondevice_rl.train.sweep.population import EXPLOITED, REFILLED
from ondevice_rl.train.sweep.programs import check_fits
from ondevice_rl.train.sweep.rounds import Run, search_setup

# Its module-scoped programs are built once: its tests share one xdist worker.
pytestmark = pytest.mark.xdist_group("search")

TINY = PPOConfig(
    total_timesteps=2 * 8 * 6,  # 6 updates: 3 rounds of 2
    num_envs=2,
    num_steps=8,
    update_epochs=1,
    num_minibatches=1,
    hidden=(8,),
)
#: A learning rate of 1e30 sends a member to inf/NaN in its first round.
SEARCH = {"learning_rate": [1e-3, 3e-3, 1e-2, 1e30], "gamma": LogUniform(0.9, 0.99)}
KWARGS = dict(seeds=2, search=SEARCH, samples=1, round_updates=2, score_episodes=4)
TRACES = []
#: A search directory an earlier version wrote (``test_a_search_directory_*``).
OLD_SEARCH = Path(__file__).parent / "data" / "sweep_dirs" / "pbt"


@pytest.fixture(scope="module", autouse=True)
def fast_cache():
    saved = DEFAULT_CACHE.compiler_options
    DEFAULT_CACHE.clear()
    DEFAULT_CACHE.compiler_options = FAST
    round_fn = population.round_fn

    def counted(*args):
        member = round_fn(*args)

        def traced(*inputs):
            TRACES.append(args)
            return member(*inputs)

        return traced

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(programs, "round_fn", counted)
        yield DEFAULT_CACHE
    DEFAULT_CACHE.clear()
    DEFAULT_CACHE.compiler_options = saved


@pytest.fixture(scope="module")
def pbt(tmp_path_factory):
    out = tmp_path_factory.mktemp("pbt")
    result = run_sweep(TINY, strategy=PBT(fraction=0.25), checkpoints=out, **KWARGS)
    return result, out


@pytest.fixture(scope="module")
def halving(pbt):
    # after pbt: its init and round programs are the ones halving reuses
    return run_sweep(TINY, strategy=Halving(eta=2, min_rounds=1), **KWARGS)


def assert_copied(before, after, parent):
    """Every leaf of ``after``'s member ``i`` is ``before``'s member
    ``parent[i]`` (itself where ``parent[i] < 0``), but PRNG keys stay."""
    flat_before = jax.tree_util.tree_leaves_with_path(before)
    for (path, old), leaf in zip(flat_before, jax.tree.leaves(after), strict=True):
        name = jax.tree_util.keystr(path)
        for i in range(len(parent)):
            want = old[i] if parent[i] < 0 or "key" in name else old[parent[i]]
            np.testing.assert_array_equal(leaf[i], want, err_msg=f"{name} of {i}")


def round_and_step(config, search, strategy, k, samples):
    """The population of ``build_plan(config, 2, search, samples=samples)``
    after one round of ``k`` updates, as host arrays (keys as data), and
    what ``strategy``'s step makes of it: ``(before, after, record)``."""
    plan = build_plan(config, 2, search, samples=samples)
    lengths = round_lengths(config.num_updates, k)
    run = Run(plan, strategy, lengths, make_mesh(), DEFAULT_CACHE, 4)
    setup = search_setup(run, False, 0)
    made, size = setup.programs, setup.shape[0]
    pop = made.init(size)(made.place(setup.inputs))
    start, window = made.replicate(np.int32(0)), made.replicate(np.float32(4))
    pop = made.round(size, k)(pop, start, window)
    before = jax.tree.map(np.asarray, checkpoints.keys_as_data(pop))
    extras = jax.tree.map(made.replicate, setup.extras)
    after, record = made.step(strategy, setup.shape, len(lengths), setup.extras)(
        pop, *extras
    )
    return before, jax.tree.map(np.asarray, checkpoints.keys_as_data(after)), record


# --- pieces, by hand ------------------------------------------------------------


def test_window_score_counts_the_last_episodes():
    returns = np.asarray([10.0, 20.0, 30.0], np.float32)  # per update, newest last
    counts = np.asarray([4.0, 1.0, 2.0], np.float32)
    cases = [  # (counts, previous score, window N, the mean by hand)
        (counts, np.nan, 3, 80 / 3),  # the newest 2 (30, 30) and 1 of 20
        (counts, np.nan, 5, 100 / 5),  # and 2 of the 4 episodes of the first
        (counts, 5.0, 10, (40 + 20 + 60 + 3 * 5) / 10),  # 3 missing: previous
        (counts, np.nan, 10, 120 / 7),  # no previous score: the 7 alone
        (np.zeros(3, np.float32), 7.0, 3, 7.0),  # none finished: previous kept
    ]
    score = jax.jit(jax.vmap(population.window_score, in_axes=(None, 0, 0, 0)))
    got = score(
        returns,
        np.stack([c[0] for c in cases]),
        np.asarray([c[1] for c in cases], np.float32),
        np.asarray([c[2] for c in cases], np.float32),
    )
    np.testing.assert_allclose(got, [c[3] for c in cases], rtol=1e-6)


def test_space_samples_and_explores_within_its_ranges():
    config = TINY
    arrays = space.SearchSpace.build(config, SEARCH)
    fields = config.HYPERPARAMS._fields
    keys = jax.random.split(jax.random.key(0), 256)
    base = config.replace(learning_rate=3e-3, gamma=0.95).hyperparams

    @jax.jit
    def both(arrays, keys):
        draw = jax.vmap(space.sample, in_axes=(None, None, 0))
        explore = jax.vmap(space.explore, in_axes=(None, None, 0, None))
        return draw(arrays, config.hyperparams, keys), explore(arrays, base, keys, 0.0)

    drawn, explored = both(arrays, keys)
    assert set(np.asarray(drawn.learning_rate).tolist()) <= {
        float(np.float32(v)) for v in SEARCH["learning_rate"]
    }
    gamma = np.asarray(drawn.gamma)
    assert gamma.min() >= np.float32(0.9) and gamma.max() <= np.float32(0.99)
    assert np.all(np.asarray(drawn.clip_eps) == np.float32(config.clip_eps))
    assert set(np.asarray(explored.learning_rate).tolist()) == {
        float(np.float32(1e-3)),
        float(np.float32(1e-2)),
    }  # a neighbouring choice, one down or one up
    # x0.8 (0.76) clipped up to 0.9, x1.25 (1.19) clipped down to 0.99
    np.testing.assert_allclose(np.unique(np.asarray(explored.gamma)), [0.9, 0.99])
    unchanged = [f for f in fields if f not in SEARCH]
    for name in unchanged:
        assert np.all(np.asarray(getattr(explored, name)) == getattr(base, name))
    assert rung_ages(1, 2, 0, 10) == [1, 2, 4, 8] and rung_ages(1, 3, 1, 10) == [3, 9]


def test_row_copy_is_bit_for_bit_and_keeps_keys():
    floats = np.asarray([[1.0, 2.0], [-0.0, np.nan], [3.0, 4.0]], np.float32)
    floats[1, 1] = np.frombuffer(np.uint32(0x7FC00123).tobytes(), np.float32)[0]
    tree = {
        "x": floats,
        "flag": np.asarray([True, False, True]),
        "count": np.asarray([7, -8, 9], np.int32),
        "key": jax.random.split(jax.random.key(0), 3),
    }
    copy = jax.jit(lambda t, to, fro: copy_rows(t, to, fro, make_mesh()))
    out = copy(tree, jnp.asarray([0, 2]), jnp.asarray([1, 1]))  # rows 0, 2 <- 1
    bits = np.asarray(out["x"]).view(np.uint32)
    assert (bits[[0, 2]] == floats[1].view(np.uint32)).all()  # -0.0, NaN payload
    assert (bits[1] == floats[1].view(np.uint32)).all()
    assert out["flag"].tolist() == [False, False, False]
    assert out["count"].tolist() == [-8, -8, -8]
    keys = jax.random.key_data(out["key"])
    np.testing.assert_array_equal(keys, jax.random.key_data(tree["key"]))


def test_requests_a_search_cannot_run_are_one_line():
    cases = [
        (dict(search={"num_envs": [2, 4], "learning_rate": [1e-3, 1e-2]}), "static"),
        (dict(search=SEARCH, samples=1, env_params={"length": [0.5, 1.0]}), "env"),
        (dict(search={"learning_rate": [1e-3]}), "at least 2 members"),
    ]
    for kwargs, message in cases:
        plan = build_plan(TINY, 2, **kwargs)
        with pytest.raises(SweepSpecError, match=message) as err:
            check_plan(plan, "pbt", round_updates=2)
        assert "\n" not in str(err.value)
    plan = build_plan(TINY, 1, SEARCH, samples=1)
    with pytest.raises(SweepSpecError, match="no rung falls within"):
        check_plan(plan, Halving(min_rounds=4), round_updates=2)
    with pytest.raises(SweepSpecError, match="unknown strategy 'grid'"):
        check_plan(plan, "grid")
    with pytest.raises(SweepSpecError, match="fraction"):
        PBT(fraction=0.7)
    mesh = make_mesh()
    budget = 5 * estimate_member_bytes(TINY) // mesh.devices.size + 1
    with pytest.raises(SweepSpecError) as err:
        check_fits(TINY, 64, mesh, budget, "pbt")
    assert "the largest population that fits is 5 members" in str(err.value)


# --- PBT ----------------------------------------------------------------------------


def test_pbt_copies_the_best_into_the_worst_and_explores(pbt):
    lineage = pbt[0].lineage
    events, parent = lineage["event"], lineage["parent"]
    score, finite, group = lineage["score"], lineage["finite"], lineage.group
    k = PBT(fraction=0.25).copies(4)
    for r in range(lineage.done - 1):  # no step after the last round
        for g in (0, 1):
            members = np.flatnonzero(group == g)
            copied = [i for i in members if events[r, i] == EXPLOITED]
            assert len(copied) == k
            for i in copied:
                j = parent[r, i]
                assert group[j] == g and finite[r, j]
                ranked = sorted(
                    members, key=lambda m: -score[r, m] if finite[r, m] else np.inf
                )
                assert j in ranked[:k] and i in ranked[-k:]
    assert (events[-1] == 0).all() and (parent[-1] == -1).all()


def test_a_non_finite_member_is_replaced_from_a_good_one(pbt):
    lineage = pbt[0].lineage
    finite, events = lineage["finite"], lineage["event"]
    bad = lineage.nonfinite()
    assert bad and bad[0][0] == 1  # lr 1e30 diverges in the first round
    for r, i, _ in bad:
        if r < lineage.done:  # replaced in the step after its round
            assert events[r - 1, i] == EXPLOITED
            assert finite[r - 1, lineage["parent"][r - 1, i]]
    picks = lineage.handed_back()
    assert all(
        p is not None and np.isfinite(lineage.final_scores()[p]) for p in picks.values()
    )


def test_exploit_copies_the_whole_state_but_the_key():
    """The step on the device: losers hold their donor's every leaf of the
    train state (params, optimiser, normaliser, env states) but their own
    PRNG key; everyone else is untouched."""
    before, after, record = round_and_step(TINY, SEARCH, PBT(fraction=0.25), 2, 1)
    parent = np.asarray(record.parent)
    losers = np.flatnonzero(parent >= 0)
    assert len(losers) == 2
    assert_copied(before.state, after.state, parent)
    for i in losers:
        assert after.score[i] == before.score[parent[i]]


def test_an_interrupted_search_resumes_to_the_same_numbers(pbt, tmp_path):
    whole, _ = pbt
    out = tmp_path / "cut"

    def stop_after_first_round(result, r):
        if r == 0:
            raise KeyboardInterrupt

    pbt = dict(strategy=PBT(), **KWARGS)
    cut = run_sweep(TINY, checkpoints=out, on_round=stop_after_first_round, **pbt)
    assert cut.interrupted and cut.lineage.done == 1 and cut.programs_compiled == 0
    resumed = run_sweep(TINY, checkpoints=out, resume=True, **pbt)
    lineage = resumed.lineage
    assert lineage.resumed_from == 1 and lineage.done == whole.lineage.done
    for name in ("score", "parent", "event", "hp/learning_rate", "hp/gamma"):
        np.testing.assert_array_equal(lineage[name], whole.lineage[name], name)
    for got, want in zip(resumed.metrics, whole.metrics, strict=True):
        for name, curve in want.items():
            np.testing.assert_array_equal(got[name], curve, name)
    # A population of another size (another device count pads it otherwise):
    # one line saying so, not a leaf's shape.
    done, path, _ = checkpoints.latest_round(out)
    arrays = dict(np.load(path / checkpoints.POPULATION_FILE))
    size = len(arrays["group"])
    fewer = {k: a[:-1] if a.ndim and len(a) == size else a for k, a in arrays.items()}
    lineage = dict(np.load(path / checkpoints.LINEAGE_FILE))
    checkpoints.save_round(tmp_path / "other", done, fewer, lineage)
    with pytest.raises(RunDirError, match=f"a population of {size - 1}, this search"):
        run_sweep(TINY, checkpoints=tmp_path / "other", resume=True, **pbt)


# --- successive halving ----------------------------------------------------------


def test_halving_stops_the_worse_half_and_refills_without_recompiling(halving):
    result, lineage = halving, halving.lineage
    events, trial, rung = lineage["event"], lineage["trial"], lineage["rung"]
    group = lineage.group
    # Round 1: everyone is 1 round old: each seed's 4 keep 2 (the non-finite
    # one among the stopped), 2 slots start new trials.
    for g in (0, 1):
        members = np.flatnonzero(group == g)
        assert (events[0, members] == REFILLED).sum() == 2
        assert sorted(rung[0, members]) == [0, 0, 1, 1]
    refilled = np.flatnonzero(events[0] == REFILLED)
    assert len(set(trial[0, refilled])) == len(refilled)
    assert trial[0, refilled].min() >= lineage.members  # new trial numbers
    lr = lineage["hp/learning_rate"][0, refilled]
    assert set(lr.tolist()) <= {float(np.float32(v)) for v in SEARCH["learning_rate"]}
    # Round 2: the first cohort (2 per seed) is 2 rounds old: one goes on; the
    # refills (1 round old) are halved too.
    for g in (0, 1):
        members = np.flatnonzero(group == g)
        assert (events[1, members] == REFILLED).sum() == 2
    assert result.programs_compiled == 1  # its step; init and round were cached
    assert max(rung[-1]) == 2


def test_new_values_and_refills_never_recompile(halving):
    traces = len(TRACES)
    again = run_sweep(
        TINY,
        strategy=Halving(eta=2, min_rounds=1),
        seeds=[5, 6],
        search={"learning_rate": LogUniform(1e-4, 1e-3), "clip_eps": [0.1, 0.3]},
        samples=2,
        round_updates=2,
        score_episodes=4,
    )
    assert again.programs_compiled == 0 and len(TRACES) == traces
    assert (again.lineage["event"] == REFILLED).sum() > 0


# --- CLI ----------------------------------------------------------------------------


CLI_TINY = [
    "--total-timesteps", "96", "--num-envs", "2", "--num-steps", "8",
    "--update-epochs", "1", "--num-minibatches", "1", "--hidden", "8",
    "--no-progress", "--round-updates", "2", "--score-episodes", "4",
    "--seeds", "2", "--learning-rate", "1e-3,3e-3,1e-2,1e30",
    "--gamma", "loguniform:0.9:0.99", "--samples", "1", "--cpu-devices", "1",
]  # fmt: skip


def test_cli_pbt_writes_lineage_report_and_members(pbt, tmp_path, capsys):
    whole, _ = pbt
    out = tmp_path / "pbt"
    assert cli.main(["sweep", "--strategy", "pbt", "--out", str(out), *CLI_TINY]) == 0
    printed = capsys.readouterr().out
    assert "handed back after 3 of 3 rounds" in printed and "non-finite" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["programs_compiled"] == 0 and summary["strategy"]["name"] == "pbt"
    assert [p["member"] for p in summary["handed_back"]] == list(
        whole.lineage.handed_back().values()
    )
    assert summary["nonfinite"] and 0 <= summary["timing"]["step_share"] < 1
    with (out / "lineage.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3 * 8 and {r["event"] for r in rows} >= {"kept", "exploited"}
    for name in ("lineage.png", "profile.png", "curves.npz", "sweep.csv"):
        assert (out / name).stat().st_size > 0, name
    best = summary["best_member"]
    policy = ondevice_rl.load_policy(out, member="best")
    assert policy.run.member == best
    lr = summary["handed_back"][0]["hp"]["learning_rate"]
    assert (
        ondevice_rl.load_policy(
            out, member=whole.lineage.handed_back()[0]
        ).config.learning_rate
        == lr
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["--eta", "3"], "--eta needs --strategy"),
        (["--strategy", "halving", "--fraction", "0.3"], "--fraction is a pbt setting"),
        (["--strategy", "pbt", "--fraction", "0.9"], "fraction must be in (0, 0.5]"),
        (["--strategy", "pbt", "--chunk-size", "4"], "runs its population as one"),
        (["--strategy", "halving", "--num-envs", "2,4", "--learning-rate", "1e-3,1e-2"],
         "static fields take one value"),
    ],
)  # fmt: skip
def test_cli_bad_search_requests_exit_2_with_one_line(args, message, capsys, tmp_path):
    out = tmp_path / "x"
    assert cli.main(["sweep", *args, "--out", str(out), "--cpu-devices", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
    assert not out.exists()


def test_a_search_directory_written_before_resumes_and_loads(pbt, tmp_path, capsys):
    """``OLD_SEARCH``: ``sweep --strategy pbt *CLI_TINY`` as an earlier
    version wrote it (checkpoints of rounds 2 and 3). Its members load; its
    last round taken away, ``sweep --resume`` continues from round 2 and
    writes the lineage and table the earlier version wrote."""
    out = tmp_path / "pbt"
    shutil.copytree(OLD_SEARCH, out)
    summary = json.loads((out / "summary.json").read_text())
    assert (
        ondevice_rl.load_policy(out, member="best").run.member == summary["best_member"]
    )
    tables = {name: (out / name).read_text() for name in ("lineage.csv", "sweep.csv")}
    shutil.rmtree(out / "search" / "round-3")
    for name in ("lineage.csv", "sweep.csv", "summary.json"):
        (out / name).unlink()
    assert cli.main(["sweep", "--resume", "--out", str(out), "--no-progress"]) == 0
    assert "resumed after round 2" in capsys.readouterr().err
    for name, text in tables.items():
        assert (out / name).read_text() == text, name
    resumed = json.loads((out / "summary.json").read_text())
    assert resumed["handed_back"] == summary["handed_back"]


def test_sweep_compare_at_a_tiny_size(pbt, halving, tmp_path, capsys):
    # after the fixtures: their programs (init, round, steps) are reused
    """``ondevice-rl sweep compare``: the same space, N and env steps per
    method, paired by search seed, each handed-back member evaluated
    deterministically; files and numbers as documented. The docs' figure
    and the joining of comparisons (``benchmarks/search_evidence.py``) take
    its record."""
    argv = [
        "sweep", "compare", "--env", "CartPole-v1", "--total-timesteps", "96",
        "--set", "num_envs=2", "--set", "num_steps=8", "--set", "update_epochs=1",
        "--set", "num_minibatches=1", "--set", "hidden=[8]", "--members", "4",
        "--search-seeds", "2", "--round-updates", "2", "--score-episodes", "4",
        "--eval-episodes", "4", "--halving-budget", "1", "--out", str(tmp_path),
        "--no-progress", "--search", "learning_rate=loguniform:1e-4:1e-1",
        "--search", "gamma=loguniform:0.9:0.99", "--cpu-devices", "1",
    ]  # fmt: skip
    assert cli.main(argv) == 0
    record = json.loads((tmp_path / "compare.json").read_text())
    rows = {r["method"]: r for r in record["methods"]}
    assert list(rows) == ["random", "pbt", "halving"]
    assert record["machine"]["cpu_count"] == os.cpu_count()  # named in the figure
    assert record["machine"]["processor"] and record["machine"]["backend"] == "cpu"
    assert len({r["env_steps"] for r in rows.values()}) == 1  # the same budget
    for r in rows.values():
        returns = np.asarray(r["eval_returns"], np.float64)
        assert returns.shape == (2,) and np.all(returns >= 1)
        assert r["ci"][0] <= r["iqm"] <= r["ci"][1]
        assert all(np.isfinite(s) for s in r["training_scores"])
    diff = rows["pbt"]["minus_random"]
    assert diff["ci"][0] <= diff["mean"] <= diff["ci"][1]
    table = (tmp_path / "compare.md").read_text()
    assert "| pbt | 768 |" in table and capsys.readouterr().out == table
    assert [r["slots"] for r in rows.values()] == [4, 4, 4]
    _the_evidence_joins_comparisons(record, tmp_path)
    # Halving's half budget as shorter slots (the default) or as half the
    # slots at full length: the plan it would search.
    space = {"learning_rate": LogUniform(1e-4, 1e-1), "gamma": LogUniform(0.9, 0.99)}
    how = compare.Comparison(members=4, seeds=(0, 1), eta=3, min_rounds=2)
    shorter = compare.method_setup("halving", TINY, space, how)[3]
    how = how._replace(halving_spend="slots")
    _, slots, strategy, fewer = compare.method_setup("halving", TINY, space, how)
    assert len(shorter.members) == 8 and shorter.base.total_timesteps == 48
    assert len(fewer.members) == 4 and fewer.base.total_timesteps == 96
    assert sorted({m.seed for m in fewer.members}) == [0, 1]  # 2 slots per seed
    assert strategy == Halving(eta=3, min_rounds=2, brackets=1) and slots == 2
    # Bad requests are one line before any method trains.
    for extra, message in [
        (["--eta", "1"], "halving eta must be an integer >= 2"),
        (["--min-rounds", "9"], "no rung falls within"),
        (["--methods", "random,bogus"], "unknown method 'bogus'"),
        (["--first-seed", "-1"], "--first-seed"),
    ]:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(compare, "run_plan", None)  # would fail if it trained
            assert cli.main([*argv, *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("ondevice-rl sweep compare: error:"), err
        assert message in err and "\n" not in err


def _the_evidence_joins_comparisons(record, tmp_path):
    """``benchmarks/search_evidence.py merge``: comparisons (here the run
    with itself) joined without training, with the docs' figure."""
    path = Path(__file__).parents[1] / "benchmarks" / "search_evidence.py"
    spec = importlib.util.spec_from_file_location("search_evidence", path)
    evidence = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(evidence)
    merged_dir = tmp_path / "merged"
    assert (
        evidence.main(["merge", str(tmp_path), str(tmp_path), "--out", str(merged_dir)])
        == 0
    )
    merged = json.loads((merged_dir / "compare.json").read_text())
    for row, part in zip(merged["methods"], record["methods"], strict=True):
        assert row["eval_returns"] == part["eval_returns"] * 2
        assert row["env_steps"] == 2 * part["env_steps"]
        assert row["ci"][0] <= row["iqm"] <= row["ci"][1]
    assert merged["search_seeds"] == record["search_seeds"] * 2
    assert "minus_random" in merged["methods"][1] and len(merged["parts"]) == 2
    assert (merged_dir / "compare.png").stat().st_size > 0


# --- slow: every learner, a real kill, two processes ---------------------------------

EVERY = {
    "ppo": dict(num_envs=2, num_steps=4, num_minibatches=2, total_timesteps=32),
    "a2c": dict(num_envs=2, num_steps=4, total_timesteps=32),
    "pqn": dict(num_envs=2, num_steps=4, num_minibatches=2, total_timesteps=32),
    "dqn": dict(num_envs=2, buffer_size=16, batch_size=4, total_timesteps=32,
                learning_starts=4),
    "sac": dict(num_envs=2, buffer_size=16, batch_size=4, total_timesteps=32,
                learning_starts=4),
    "td3": dict(num_envs=2, buffer_size=16, batch_size=4, total_timesteps=32,
                learning_starts=4),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("name", algorithms())
def test_every_learner_copies_its_whole_state_and_refills(name):
    """PBT's step copies every leaf of every learner's state (replay buffers
    included) but the key; halving refills without recompiling."""
    algorithm = get_algorithm(name)
    fields = {f for f in algorithm.defaults()}
    config = algorithm.config(
        hidden=(8,), **{k: v for k, v in EVERY[name].items() if k in fields}
    )
    search = {"learning_rate": LogUniform(1e-4, 1e-2), "gamma": [0.9, 0.99]}
    k = config.num_updates // 2
    before, after, record = round_and_step(config, search, PBT(fraction=0.5), k, 2)
    parent = np.asarray(record.parent)
    assert (parent >= 0).sum() == 4  # half of each seed's 4 members
    assert_copied(before.state, after.state, parent)
    halving = run_sweep(
        config, strategy=Halving(), seeds=2, search=search, samples=2, round_updates=k
    )
    assert (halving.lineage["event"] == REFILLED).sum() > 0
    assert all(np.isfinite(m["episode_return"]).all() for m in halving.metrics)


@pytest.mark.slow
def test_halving_brackets_judge_later_brackets_later():
    """Two brackets, min 1 round, eta 2, 6 rounds: bracket 0 is judged at
    ages 1, 2, 4, bracket 1 at 2, 4; slots are dealt to brackets in turn."""
    config = TINY.replace(total_timesteps=2 * 8 * 12)  # 6 rounds of 2
    space = {"learning_rate": LogUniform(1e-4, 1e-2)}
    result = run_sweep(
        config, strategy=Halving(eta=2, min_rounds=1, brackets=2), seeds=1,
        search=space, samples=8, round_updates=2, score_episodes=4,
    )  # fmt: skip
    events = result.lineage["event"]
    place = np.arange(8)  # one group: a member's place is its index
    first, second = place % 2 == 0, place % 2 == 1
    assert (events[0, first] == REFILLED).sum() == 2  # 4 in bracket 0 -> 2 go on
    assert (events[0, second] == REFILLED).sum() == 0  # bracket 1: not yet judged
    assert (events[1, second] == REFILLED).sum() == 2  # its first rung, age 2
    rung = result.lineage["rung"]
    assert rung[-1].max() >= 2


CLI = "import sys; from ondevice_rl.train.cli import main; sys.exit(main())"
SEARCH_ARGS = [
    "sweep", "--strategy", "pbt", "--seeds", "2", "--samples", "4",
    "--learning-rate", "loguniform:1e-4:1e-2", "--gamma", "0.9,0.99",
    "--total-timesteps", "6400", "--num-envs", "4", "--num-steps", "16",
    "--update-epochs", "1", "--num-minibatches", "1", "--hidden", "16",
    "--round-updates", "2", "--score-episodes", "8", "--no-progress",
]  # fmt: skip


def _popen(args, cache_dir, devices=1, extra_env=None):
    env = dict(os.environ, ONDEVICE_RL_CACHE_DIR=str(cache_dir), JAX_PLATFORMS="cpu")
    env.update(extra_env or {})
    return subprocess.Popen(
        [sys.executable, "-c", CLI, *args, "--cpu-devices", str(devices)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finished(proc) -> str:
    """The process's stderr once it ended well."""
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    return err


def _tables(out):
    lineage = (out / "lineage.csv").read_text()
    rows = (out / "sweep.csv").read_text()
    return lineage, rows


@pytest.mark.slow
def test_kill_9_mid_search_then_resume_ends_identical(tmp_path):
    cache = tmp_path / "cache"
    whole = tmp_path / "whole"
    _finished(_popen([*SEARCH_ARGS, "--out", str(whole)], cache))
    cut = tmp_path / "cut"
    proc = _popen([*SEARCH_ARGS, "--out", str(cut)], cache)
    kill_9_when(proc, cut / "search" / "round-20")
    assert not (cut / "summary.json").exists()  # killed mid-search
    resumed = _popen(["sweep", "--resume", "--out", str(cut), "--no-progress"], cache)
    assert "resumed after round" in _finished(resumed)
    assert _tables(cut) == _tables(whole)
    summary = json.loads((cut / "summary.json").read_text())
    assert summary["resumed_from"] >= 20


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_processes_search_as_one_process_with_two_devices(tmp_path):
    """The population split over two processes (one CPU device each, gloo)
    gives one process's lineage with two devices."""
    args = [*SEARCH_ARGS[:-7], "--round-updates", "5", "--no-progress"]
    cache = tmp_path / "cache"
    single = tmp_path / "single"
    _finished(_popen([*args, "--out", str(single)], cache, devices=2))
    port, multi = _free_port(), tmp_path / "multi"
    procs = [
        _popen(
            [*args, "--out", str(multi), "--coordinator", f"127.0.0.1:{port}",
             "--num-processes", "2", "--process-id", str(i)],
            cache,
        )
        for i in range(2)
    ]  # fmt: skip
    for proc in procs:
        _finished(proc)
    summary = json.loads((multi / "summary.json").read_text())
    assert summary["processes"] == 2 and summary["devices"] == 2
    with (single / "lineage.csv").open() as f, (multi / "lineage.csv").open() as g:
        one, two = list(csv.DictReader(f)), list(csv.DictReader(g))
    assert [r["event"] for r in one] == [r["event"] for r in two]
    assert [r["parent"] for r in one] == [r["parent"] for r in two]
    np.testing.assert_allclose(
        [float(r["score"]) for r in two], [float(r["score"]) for r in one], rtol=1e-4
    )
