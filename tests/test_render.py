"""``ondevice-rl render``: one episode of a trained policy to a GIF (or MP4),
frames of classic control drawn by gymnasium's renderer from our states
(train/use/render.py, renderers.py; MinAtar, brax and MJX: test_export_render.py)."""

import json
import sys

import jax
import numpy as np
import pytest
from PIL import Image
from tiny_runs import tiny_run

import ondevice_rl
from ondevice_rl.train.cli import main
from ondevice_rl.train.use import render, renderers

# The tiny runs (tests/tiny_runs.py) are built once: these tests share a worker.
pytestmark = pytest.mark.xdist_group("tiny_runs")

pytest.importorskip("pygame")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A tiny PPO CartPole run (4 updates, compiled without optimisation),
    the one tests/test_evaluate.py evaluates (tests/tiny_runs.py): trained
    once per process for both."""
    return tiny_run("ppo", tmp_path_factory)[0]


def test_render_writes_a_gif_of_one_episode(run_dir, tmp_path, capsys):
    out = tmp_path / "episode.gif"
    argv = ["render", str(run_dir), "--out", str(out), "--seed", "2", "--scale", "0.5"]
    assert main(argv) == 0
    stdout = capsys.readouterr().out
    frames = int(stdout.split(": ")[1].split()[0])
    length = int(stdout.rsplit("length ", 1)[1])
    assert frames == length + 1 >= 3  # the reset state, then one per step
    with Image.open(out) as gif:
        assert gif.format == "GIF" and gif.size == (300, 200)
        assert gif.n_frames >= 3  # Pillow merges identical frames
        gif.seek(1)
        assert np.asarray(gif.convert("RGB")).std() > 0  # not a blank frame


def test_mp4_when_an_encoder_is_there(run_dir, tmp_path, monkeypatch, capsys):
    frames = [np.full((41, 61, 3), 40 * i, np.uint8) for i in range(5)]  # odd size
    if render.ffmpeg_executable() is not None:
        out = render.write_video(frames, tmp_path / "a.mp4", fps=10)
        assert out.read_bytes()[4:8] == b"ftyp"  # an MP4 container
    monkeypatch.setattr(render, "ffmpeg_executable", lambda: None)
    assert main(["render", str(run_dir), "--out", str(tmp_path / "b.mp4")]) == 2
    err = capsys.readouterr().err
    assert "pip install imageio-ffmpeg" in err and err.count("\n") == 1


@pytest.mark.parametrize("name", sorted(renderers.GYMNASIUM_DRAWN))
def test_every_classic_control_env_draws_our_reset_state(name):
    env, params = ondevice_rl.make(name)
    _, state = env.reset(jax.random.key(0), params)
    renderer = renderers.GymnasiumRenderer(name)
    try:
        frame = renderer.draw(jax.device_get(state))
    finally:
        renderer.close()
    assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3
    assert frame.std() > 0


def _probe_run(tmp_path, run_dir):
    """A run directory whose config names an env that cannot be drawn."""
    info = json.loads((run_dir / "config.json").read_text())
    info["config"]["env"] = "Probe-OneStep-v0"
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "config.json").write_text(json.dumps(info))
    return probe


def test_bad_render_input_is_one_line(run_dir, tmp_path, monkeypatch, capsys):
    cases = [
        ([str(_probe_run(tmp_path, run_dir))], "Probe-OneStep-v0 cannot be rendered"),
        ([str(run_dir), "--out", str(tmp_path / "x.avi")], "write a .gif or an .mp4"),
        ([str(tmp_path / "missing")], "no such run directory"),
    ]
    for argv, message in cases:
        assert main(["render", *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    monkeypatch.setitem(sys.modules, "pygame", None)  # as if not installed
    assert main(["render", str(run_dir), "--out", str(tmp_path / "p.gif")]) == 2
    err = capsys.readouterr().err
    assert "needs pygame: pip install 'ondevice_rl[render]'" in err
    assert err.count("\n") == 1
