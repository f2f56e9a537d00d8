"""``ondevice-rl plot``: runs' and sweeps' curves on one figure, smoothed per
seed, banded by their spread (train/use/curves.py, smoothing.py, plots.py).

Run and sweep directories are written here in the formats the runner
(``artifacts``) and sweeps (``sweep/result.py``, ``report.py``) write; the
figure's matplotlib objects are compared with smoothing done by hand.
"""

import csv

import numpy as np
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_rgb

from ondevice_rl.train.cli import main
from ondevice_rl.train.run import artifacts
from ondevice_rl.train.use.curves import load_series
from ondevice_rl.train.use.plots import plot_series
from ondevice_rl.train.use.smoothing import summarize

PNG = b"\x89PNG"


def _run(path, returns, seed=0, evals=None, lr=3e-4, per_update=512):
    path.mkdir(parents=True)
    metrics = {"episode_return": np.asarray(returns, np.float32)}
    if evals is not None:
        metrics["eval_return"] = np.asarray(evals, np.float32)
    artifacts.append_metrics(path / artifacts.METRICS_FILE, metrics, per_update, 0)
    info = {
        "algo": "ppo",
        "config": {"env": "CartPole-v1"},
        "hyperparams": {"learning_rate": lr},
        "seed": seed,
    }
    artifacts.write_json(path / artifacts.CONFIG_FILE, info)
    return path


def _sweep(path):
    """2 settings (learning_rate 1e-3, 3e-3) × 2 seeds, 3 updates of 100 steps."""
    path.mkdir()
    columns = ["member", "setting", "seed", "learning_rate", "gamma", "num_updates"]
    columns += ["final_return", "last10pct_return", "auc"]
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


def _ema_by_hand(x, span):
    """Mean and std, the recurrences written out one point at a time."""
    alpha, mean, var = 2 / (span + 1), [x[0]], [0.0]
    for value in x[1:]:
        delta = value - mean[-1]
        mean.append(mean[-1] + alpha * delta)
        var.append((1 - alpha) * (var[-1] + alpha * delta**2))
    return np.array(mean), np.sqrt(var)


def _noisy(seed, n=200):
    """A rising, noisy curve as ``metrics.jsonl`` keeps it (float32 values)."""
    rng = np.random.default_rng(seed)
    x = np.linspace(0, 100, n) + rng.normal(0, 20, n)
    return x.astype(np.float32).astype(np.float64)


def test_lines_are_smoothed_means_and_bands_the_spread_over_seeds(tmp_path, capsys):
    seeds = [_run(tmp_path / f"s{i}", _noisy(i), seed=i) for i in range(3)]
    other = _run(tmp_path / "other", _noisy(9), lr=1e-3)  # another setting
    out = tmp_path / "curves.png"
    argv = ["plot", *map(str, seeds), str(other), "--out", str(out)]
    assert main(argv) == 0
    assert "2 curve(s)" in capsys.readouterr().out and out.read_bytes()[:4] == PNG

    series = load_series([*seeds, other])
    fig = plot_series(series, tmp_path / "again.png", span=10)
    ax = fig.axes[0]
    lines, bands = ax.get_lines(), ax.collections
    assert len(lines) == 2 and len(bands) == 2
    (caption,) = fig.texts
    assert caption.get_text() == (
        "EMA, span 10; band: min–max over seeds, ± std of a single seed's values"
    )
    assert all(isinstance(band, PolyCollection) for band in bands)
    assert lines[0].get_label() == "s0, s1, s2 (CartPole-v1 ppo, seeds 0, 1, 2)"
    assert lines[1].get_label() == "other (CartPole-v1 ppo, seed 0)"

    smoothed = np.stack([_ema_by_hand(_noisy(i), 10)[0] for i in range(3)])
    np.testing.assert_allclose(lines[0].get_xdata(), np.arange(1, 201) * 512)
    np.testing.assert_allclose(lines[0].get_ydata(), smoothed.mean(0), rtol=1e-6)
    band = bands[0].get_paths()[0].vertices[:, 1]  # the upper edge, the lower back
    np.testing.assert_allclose(band.max(), smoothed.max(), rtol=1e-6)
    np.testing.assert_allclose(band.min(), smoothed.min(), rtol=1e-6)

    mean, std = _ema_by_hand(_noisy(9), 10)  # one seed
    np.testing.assert_allclose(lines[1].get_ydata(), mean, rtol=1e-6)
    curve = summarize(series[1], span=10)
    np.testing.assert_allclose(curve.high - curve.line, std, rtol=1e-5, atol=1e-9)
    for line, band in zip(lines, bands, strict=True):  # a band in its line's colour
        assert tuple(band.get_facecolor()[0][:3]) == to_rgb(line.get_color())

    window = summarize(series[1], "window", 4)  # the trailing mean of 4 points
    x = _noisy(9)
    np.testing.assert_allclose(
        window.line[3:], np.convolve(x, np.ones(4) / 4, "valid"), rtol=1e-6
    )
    np.testing.assert_allclose(window.line[:2], [x[0], x[:2].mean()], rtol=1e-6)
    iqr = summarize(series[0], "none", band="iqr")
    raw = np.stack([_noisy(i) for i in range(3)])
    np.testing.assert_allclose(iqr.low, np.percentile(raw, 25, axis=0), rtol=1e-6)
    assert summarize(series[1], "none").low is None  # one seed, raw: no band

    separate = load_series([*seeds, other], group=False)
    assert len(separate) == 4 and separate[0].values.shape == (1, 200)


def test_a_sweep_gives_one_banded_curve_per_setting(tmp_path):
    sweep = _sweep(tmp_path / "sweep")
    best, second = load_series([sweep])  # ranking.csv order: setting 1 first
    assert best.label == "sweep: learning_rate=0.003 (2 seeds)"
    assert second.label.startswith("sweep: learning_rate=0.001")
    curve = summarize(best, "none")
    np.testing.assert_allclose(curve.line, [2.5, 4.5, 6.5])  # seeds +0, +1
    np.testing.assert_allclose(curve.low, [2, 4, 6])
    np.testing.assert_allclose(curve.high, [3, 5, 7])
    np.testing.assert_array_equal(curve.steps, [100, 200, 300])
    assert len(load_series([sweep], top=1)) == 1


def test_runs_lacking_the_metric_are_skipped_with_one_warning(tmp_path, capsys):
    evaluated = _run(tmp_path / "r", [1, 2, 3, 4], evals=[np.nan, 7, np.nan, 9])
    plain = _run(tmp_path / "plain", [1, 2, 3, 4], lr=1e-3)
    out = tmp_path / "eval.png"
    argv = ["plot", str(evaluated), str(plain), str(_sweep(tmp_path / "sweep"))]
    assert main([*argv, "--metric", "eval_return", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "1 curve(s)" in captured.out and out.read_bytes()[:4] == PNG
    (warning,) = captured.err.splitlines()
    assert warning.startswith("ondevice-rl plot: warning: no metric 'eval_return' in")
    assert f"{plain}, {tmp_path / 'sweep'}; skipped" in warning

    (series,) = load_series([evaluated], metric="eval_return")
    curve = summarize(series, span=1)  # only where evaluated, drawn with markers
    np.testing.assert_array_equal(curve.steps, [1024, 2048])
    np.testing.assert_array_equal(curve.line, [7, 9])
    assert curve.sparse


@pytest.mark.parametrize(
    "which, extra, message",
    [
        ("missing", [], "no such directory"),
        ("empty", [], "neither a run (metrics.jsonl) nor a sweep"),
        ("run", ["--metric", "nope"], "no metric 'nope' in any of them (known: "),
        ("nan", ["--metric", "eval_return"], "no finite value of 'eval_return' in"),
        ("run", ["--top", "0"], "not a positive integer"),
        ("run", ["--smooth", "lowess"], "invalid choice: 'lowess'"),
    ],
)
def test_bad_plot_input_is_one_line_and_exit_2(which, extra, message, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    _run(tmp_path / "run", [1, 2])
    _run(tmp_path / "nan", [1, 2], evals=[np.nan, np.nan])  # never evaluated
    argv = ["plot", str(tmp_path / which), *extra, "--out", str(tmp_path / "x.png")]
    try:
        rc = main(argv)
    except SystemExit as e:
        rc = e.code
    assert rc == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not (tmp_path / "x.png").exists()
