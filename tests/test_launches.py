"""``bench launches``: the thunk-sequence counts on a hand-worked case, the
command's one-line errors, and PPO compiled for an H100 target: ours
launches fewer and runs no more device work items per update than the
textbook script (its counts as recorded; compiled beside ours, and DQN,
under ``make test-slow``)."""

import json
from pathlib import Path

import pytest

from ondevice_rl.train.bench import launches, thunks
from ondevice_rl.train.cli import main

DATA = Path(__file__).with_name("data")
RESULTS = Path(__file__).parents[1] / "docs" / "results"


def _hand_worked():
    return thunks.annotate(
        (DATA / "thunk_sequence.txt").read_text(),
        (DATA / "thunk_metadata.txt").read_text(),
        (DATA / "gpu_after_optimizations.txt").read_text(),
    )


def test_counts_follow_graphs_loops_and_trip_counts():
    # The update loop (10 iterations) holds a CUDA graph of 3 items (a GEMM,
    # a fusion, a memcpy), a loop of 32 iterations of a dynamic-slice copy
    # and a DUS kernel launched outside any graph, and a loose sort.
    top = _hand_worked()
    whole = thunks.count(top).as_dict()
    assert whole["items"] == 3 + 1 + 10 * (3 + 32 * 2 + 1)
    assert whole["memcpys"] == 1 + 10 * (1 + 32)
    assert whole["graph_launches"] == 1 + 10
    assert whole["outside_graphs"] == 1 + 10 * (32 * 2 + 1)
    per = thunks.per_update(top, 10)
    assert per["update"]["items"] == 68
    assert per["update"]["launches"] == 1 + 65
    assert per["update"]["kinds"] == dict(fusion=33, gemm=1, memcpy=33, sort=1)
    assert per["direct"]["items"] == 4
    (loop,) = per["loops"]
    assert loop["source"] == "loop.py:25 (rollout)"
    assert loop["trip_count"] == 32
    assert loop["per_iteration"]["outside_graphs"] == 2
    assert per["conditionals"] == []


def test_an_update_loop_that_is_not_there_is_named():
    with pytest.raises(ValueError, match="no loop of 7 iterations"):
        thunks.per_update(_hand_worked(), 7)


def test_conditional_branches_count_by_the_share_that_takes_them():
    seq = (
        "001: kConditional [source | sink] \n"
        "      false_branch:\n"
        "        002: kCustomKernel [source | sink] loop_add_fusion grid: [1, 1, 1]\n"
        "        003: kCopy [source | sink] kCopy\n"
        "      true_branch:\n"
        "        004: kCopy [source | sink] kCopy\n"
    )
    # XLA runs the first branch listed when the predicate holds (the dump
    # calls it false_branch); here it holds in 2% of the updates.
    top = thunks.parse_sequence(seq)
    assert thunks.count(top).items == pytest.approx(0.5 * 2 + 0.5 * 1)
    weighted = thunks.count(top, p_true={id(top[0]): 0.02})
    assert weighted.items == pytest.approx(0.02 * 2 + 0.98 * 1)
    assert weighted.memcpys == pytest.approx(1.0)
    assert weighted.kinds["fusion"] == pytest.approx(0.02)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--algo", "nope"], "--algo: unknown learner(s) nope"),
        (["--target", "/no/such.txtpb"], "--target: '/no/such.txtpb' is neither"),
        (["--reference", "maybe"], "--reference: expected auto, none or a .py"),
        (["--reference", "/no/ref.py"], "--reference: no such file"),
        (["--recipe", "no_such_recipe"], "--recipe:"),
    ],
)
def test_bad_input_is_one_line_before_anything_compiles(argv, message, capsys):
    assert main(["bench", "launches", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_a_target_file_that_is_not_a_target_config(tmp_path, capsys):
    bad = tmp_path / "t.txtpb"
    bad.write_text("hello")
    assert main(["bench", "launches", "--target", str(bad)]) == 2
    assert "not a GpuTargetConfig" in capsys.readouterr().err


def test_a_plugin_that_cannot_be_installed_names_the_command(tmp_path, monkeypatch):
    monkeypatch.setenv("ONDEVICE_RL_CUDA_PLUGIN_DIR", str(tmp_path / "plugin"))
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    with pytest.raises(launches.LaunchesError) as e:
        launches.ensure_plugin(lambda m: None)
    text = str(e.value)
    assert "pip install --no-deps --target" in text and "jax-cuda12-plugin==" in text
    assert "\n" not in text
    assert not (tmp_path / "plugin").exists()


@pytest.fixture(scope="module")
def plugin():
    try:
        return launches.ensure_plugin(lambda m: None)
    except launches.LaunchesError as e:
        pytest.skip(f"JAX's CUDA plugin cannot be installed here: {e}")


def _counted(name: str, reference: str) -> dict:
    target = launches.target_file("h100")
    rows = launches.run_launches(
        [(name, *launches.PROGRAMS[name])], [1], target, reference, lambda m: None
    )
    json.dumps(rows)  # what --json prints
    return rows[0]


def _assert_leaner(ours: dict, ref: dict) -> None:
    assert ours["launches"] <= ref["launches"], (ours, ref)
    assert ours["items"] <= ref["items"], (ours, ref)


def _recorded_reference(name: str) -> dict:
    """The reference's per-update counts at 1 seed on the H100, as the GPU
    page states them (the same jax and XLA: the pinned 0.10.2)."""
    rows = json.loads((RESULTS / "gpu_launches_after.json").read_text())
    (row,) = [r for r in rows if r["program"] == name and r["seeds"] == 1]
    return row["reference"]["update"]


def test_ppo_launches_fewer_than_its_reference_on_an_h100(plugin):
    # Ours compiled here; the reference's counts as recorded (compiling it
    # here too: the slow test below).
    row = _counted("ppo", "none")
    _assert_leaner(row["ours"]["update"], _recorded_reference("ppo"))
    # The env-step loop is one CUDA graph per step; the returns scan unrolled.
    scopes = {lp["source"].split(":")[0]: lp for lp in row["ours"]["loops"]}
    step = scopes["rollout"]
    assert step["trip_count"] == 128
    assert step["per_iteration"]["launches"] == 1
    assert scopes["returns"]["trip_count"] == 128 // 16
    assert row["ours"]["conditionals"] == []


@pytest.mark.slow
def test_ppo_launches_fewer_than_its_reference_compiled_beside_it(plugin):
    row = _counted("ppo", "auto")
    _assert_leaner(row["ours"]["update"], row["reference"]["update"])
    assert row["reference"]["update"] == _recorded_reference("ppo")


@pytest.mark.slow
def test_dqn_launches_fewer_than_its_reference_on_an_h100(plugin):
    row = _counted("dqn", "auto")
    _assert_leaner(row["ours"]["update"], row["reference"]["update"])
    assert row["ours"]["conditionals"] == []  # selects: no predicate read back
    # The reference's learning step counts (it runs every update once
    # learning has started): its GEMMs are in the update's items.
    assert row["reference"]["update"]["kinds"]["gemm"] > 0
    shares = [c["p_true"] for c in row["reference"]["conditionals"]]
    assert shares == [1.0, 0.02]
