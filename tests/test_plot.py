"""``ondevice-rl plot``: runs' and sweeps' curves on one figure (train/use/plots.py).

Run and sweep directories are written here in the formats the runner
(``artifacts``) and sweeps (``sweep/results.py``, ``report.py``) write.
"""

import csv

import numpy as np
import pytest

from ondevice_rl.train.cli import main
from ondevice_rl.train.run import artifacts
from ondevice_rl.train.use.plots import load_curves

PNG = b"\x89PNG"


def _run(path, returns, seed=0, evals=None):
    path.mkdir(parents=True)
    metrics = {"episode_return": np.asarray(returns, np.float32)}
    if evals is not None:
        metrics["eval_return"] = np.asarray(evals, np.float32)
    artifacts.append_metrics(path / artifacts.METRICS_FILE, metrics, 512, 0)
    info = {"algo": "ppo", "config": {"env": "CartPole-v1"}, "seed": seed}
    artifacts.write_json(path / artifacts.CONFIG_FILE, info)
    return path


def _sweep(path):
    """2 settings (learning_rate 1e-3, 3e-3) × 2 seeds, 3 updates of 100 steps."""
    path.mkdir()
    columns = ["member", "setting", "seed", "learning_rate", "gamma", "num_updates"]
    columns += ["final_return", "last10_return", "auc"]
    curves, rows = {}, []
    for member, (setting, seed) in enumerate([(0, 0), (0, 1), (1, 0), (1, 1)]):
        lr = (1e-3, 3e-3)[setting]
        rows.append([member, setting, seed, lr, 0.99, 3, 0, 0, 0])
        returns = np.array([1.0, 2.0, 3.0]) * (setting + 1) + seed
        curves[f"member_{member}_episode_return"] = returns
        curves[f"member_{member}_env_steps"] = np.array([100, 200, 300])
    with (path / "sweep.csv").open("w", newline="") as f:
        csv.writer(f).writerows([columns, *rows])
    np.savez_compressed(path / "curves.npz", **curves)
    with (path / "ranking.csv").open("w", newline="") as f:
        csv.writer(f).writerows([["rank", "setting"], [1, 1], [2, 0]])
    return path


def test_runs_and_a_sweep_on_one_png(tmp_path, capsys):
    a = _run(tmp_path / "a", [10, 20, 30, 40])
    b = _run(tmp_path / "b", [5, 15, 25], seed=1)
    sweep = _sweep(tmp_path / "sweep")
    out = tmp_path / "curves.png"
    assert main(["plot", str(a), str(b), str(sweep), "--out", str(out)]) == 0
    assert "4 curve(s)" in capsys.readouterr().out
    assert out.read_bytes()[:4] == PNG

    curves = load_curves([a, sweep])
    assert curves[0].label == "a (CartPole-v1 ppo, seed 0)" and curves[0].std is None
    np.testing.assert_array_equal(curves[0].steps, [512, 1024, 1536, 2048])
    best, second = curves[1:]  # ranking.csv order: setting 1 first
    assert best.label == "sweep: learning_rate=0.003 (2 seeds)"
    np.testing.assert_allclose(best.mean, [2.5, 4.5, 6.5])  # seeds +0, +1
    np.testing.assert_allclose(best.std, [0.5, 0.5, 0.5])
    np.testing.assert_array_equal(best.steps, [100, 200, 300])
    assert second.label.startswith("sweep: learning_rate=0.001")
    assert len(load_curves([sweep], top=1)) == 1


def test_eval_return_plots_only_where_evaluated(tmp_path):
    run = _run(tmp_path / "r", [1, 2, 3, 4], evals=[np.nan, 7, np.nan, 9])
    (curve,) = load_curves([run], metric="eval_return")
    assert np.isnan(curve.mean[0]) and curve.mean[1] == 7  # null -> NaN
    out = tmp_path / "eval.png"
    argv = ["plot", str(run), "--metric", "eval_return", "--out", str(out)]
    assert main(argv) == 0
    assert out.read_bytes()[:4] == PNG


@pytest.mark.parametrize(
    "which, extra, message",
    [
        ("missing", [], "no such directory"),
        ("empty", [], "neither a run (metrics.jsonl) nor a sweep"),
        ("run", ["--metric", "nope"], "no metric 'nope'"),
        ("run", ["--top", "0"], "not a positive integer"),
    ],
)
def test_bad_plot_input_is_one_line_and_exit_2(which, extra, message, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    _run(tmp_path / "run", [1, 2])
    argv = ["plot", str(tmp_path / which), *extra, "--out", str(tmp_path / "x.png")]
    try:
        rc = main(argv)
    except SystemExit as e:
        rc = e.code
    assert rc == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not (tmp_path / "x.png").exists()
