"""A trained run, exported and rendered (train/use/export.py, render.py,
renderers.py).

``ondevice-rl export``: the run's deterministic policy as a ``jax.export``
artifact, loaded in a fresh Python process that never imports this package,
whose actions must equal ``load_policy``'s. ``ondevice-rl render``: MinAtar
as a grid of its channels, brax and MJX by MuJoCo's renderer (headless GL).

The default suite trains one tiny PPO run on Breakout-MinAtar with
observation normalisation (the statistics must travel inside the artifact;
the image torso too) and both exports and renders it. Every other learner,
the memory policies (whose artifact takes and returns the carry), and brax
and MJX rendering are ``slow``.
"""

import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest
from PIL import Image

import ondevice_rl
from ondevice_rl.train import get_algorithm
from ondevice_rl.train.cli import main
from ondevice_rl.train.use import renderers
from ondevice_rl.train.use.export import signature

# Its module-scoped programs are built once: its tests share one xdist worker.
pytestmark = pytest.mark.xdist_group("export-render")

STEPS, BATCH = 4, 5
MINATAR = "gymnax/Breakout-MinAtar"

#: Runs in a fresh interpreter: loads the artifact with JAX alone, plays
#: ``obs`` [STEPS, BATCH, ...] through it (the carry, if any, from zeros),
#: checks a batch of one, and writes the actions; fails if anything imported
#: this package.
LOADER = textwrap.dedent(
    """
    import sys
    import jax, jax.numpy as jnp, numpy as np

    artifact, data, out = sys.argv[1:]
    with open(artifact, "rb") as f:
        exported = jax.export.deserialize(f.read())
    memory = len(exported.in_avals) > 1  # obs, then the carry's leaves

    def start(batch):  # the carry at an episode's start: zeros
        zeros = [jnp.zeros((batch, *a.shape[1:]), a.dtype) for a in exported.in_avals]
        (_, carry), _ = jax.tree.unflatten(exported.in_tree, zeros)
        return carry

    obs = np.load(data)["obs"]  # [steps, batch, *obs_shape]
    carry = start(obs.shape[1]) if memory else None
    actions = []
    for o in obs:
        if memory:
            action, carry = exported.call(jnp.asarray(o), carry)
        else:
            action = exported.call(jnp.asarray(o))
        actions.append(np.asarray(action))
    one = exported.call(obs[0, :1], start(1)) if memory else exported.call(obs[0, :1])
    first = np.asarray(one[0] if memory else one)
    np.testing.assert_allclose(first, actions[0][:1], rtol=1e-5, atol=1e-6)
    assert "ondevice_rl" not in sys.modules, "the artifact needed ondevice_rl"
    np.savez(out, actions=np.stack(actions), platforms=np.array(exported.platforms))
    """
)


def _train(out, algo, env, *flags, num_steps=None):
    """A run of two updates of ``algo`` on ``env``, small everything
    (rollouts of ``num_steps`` if given)."""
    sizes = {} if num_steps is None else {"num_steps": num_steps}
    steps = 2 * get_algorithm(algo).config(env=env, **sizes).steps_per_update
    if num_steps is not None:
        flags = ("--num-steps", str(num_steps), *flags)
    argv = ["train", "--algo", algo, "--env", env, "--total-timesteps", str(steps)]
    argv += ["--hidden", "8", "--no-progress", "--out", str(out), *flags]
    assert main(argv) == 0
    return out


@pytest.fixture(scope="module")
def minatar_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("minatar") / "run"
    return _train(out, "ppo", MINATAR, "--normalize-obs", num_steps=16)


def _check_export(run_dir, tmp_path, capsys) -> str:
    """Exports ``run_dir`` by the CLI and compares the artifact's actions, in
    a process without this package, with ``load_policy``'s on random
    observations; returns what the CLI printed and the actions."""
    artifact = tmp_path / "policy.bin"
    capsys.readouterr()
    assert main(["export", str(run_dir), "--out", str(artifact)]) == 0
    printed = capsys.readouterr().out
    policy = ondevice_rl.load_policy(run_dir)
    rng = np.random.default_rng(0)
    obs = rng.normal(0, 1, (STEPS, BATCH, *policy.obs_shape)).astype(np.float32)
    expected = np.stack([np.asarray(policy(o)) for o in obs])  # carry kept
    np.savez(tmp_path / "obs.npz", obs=obs)
    loaded = tmp_path / "actions.npz"
    argv = [LOADER, str(artifact), str(tmp_path / "obs.npz"), str(loaded)]
    done = subprocess.run(
        [sys.executable, "-c", *argv], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    with np.load(loaded) as result:
        actions, platforms = result["actions"], list(result["platforms"])
    assert platforms == ["cpu", "cuda", "rocm", "tpu"]
    assert actions.shape == expected.shape and actions.dtype == expected.dtype
    if np.issubdtype(expected.dtype, np.integer):
        np.testing.assert_array_equal(actions, expected)
    else:
        np.testing.assert_allclose(actions, expected, rtol=1e-5, atol=1e-6)
    return printed, expected


def test_export_of_a_normalising_minatar_run_acts_as_load_policy(
    minatar_run, tmp_path, capsys
):
    printed, actions = _check_export(minatar_run, tmp_path, capsys)
    assert len(np.unique(actions)) > 1  # actions that tell policies apart
    assert "call(float32[b,10,10,4]) -> int32[b]" in printed
    assert "for cpu, cuda, rocm, tpu" in printed

    assert main(["export", str(tmp_path / "nope")]) == 2  # one line, no file
    err = capsys.readouterr().err
    assert "no such run directory" in err and err.count("\n") == 1
    argv = ["export", str(minatar_run), "--platforms", "cpu,gpu"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--platforms takes some of cpu, cuda, rocm, tpu; got cpu, gpu" in err
    assert not (minatar_run / "policy.bin").exists()

    exported = ondevice_rl.export_policy(minatar_run, tmp_path / "cpu.bin", ("cpu",))
    with open(tmp_path / "cpu.bin", "rb") as f:
        assert jax.export.deserialize(f.read()).platforms == ("cpu",)
    assert signature(exported) == "call(float32[b,10,10,4]) -> int32[b]"


def _gif_frames(path) -> list[np.ndarray]:
    with Image.open(path) as gif:
        assert gif.format == "GIF"
        frames = []
        for index in range(gif.n_frames):
            gif.seek(index)
            frames.append(np.asarray(gif.convert("RGB")))
    return frames


def test_render_of_minatar_draws_its_channels_as_a_grid(minatar_run, tmp_path, capsys):
    out = tmp_path / "episode.gif"
    assert main(["render", str(minatar_run), "--out", str(out), "--deterministic"]) == 0
    length = int(capsys.readouterr().out.rsplit("length ", 1)[1])
    frames = _gif_frames(out)
    assert 2 <= len(frames) <= length + 1  # Pillow merges identical frames
    cell = renderers.MINATAR_CELL
    assert frames[0].shape == (10 * cell, 10 * cell, 3)
    palette = renderers.minatar_palette(4)  # black, then a colour per channel
    allowed = {tuple(c) for c in palette} | {(40, 40, 40)}  # and the grid lines
    for frame in frames:
        assert {tuple(c) for c in frame.reshape(-1, 3)} <= allowed
        assert (frame[::cell] == 40).all() and (frame[:, ::cell] == 40).all()
    centres = frames[0][cell // 2 :: cell, cell // 2 :: cell]  # [10, 10, 3]
    drawn = {tuple(c) for c in centres.reshape(-1, 3)} - {(0, 0, 0)}
    assert tuple(palette[4]) in drawn and tuple(palette[1]) in drawn  # bricks, paddle


def test_a_missing_gl_library_is_named_in_one_line(monkeypatch):
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    monkeypatch.setattr(renderers.ctypes.util, "find_library", lambda name: None)
    with pytest.raises(ValueError) as error:
        renderers.check_renderable("brax/ant")
    message = str(error.value)
    assert "\n" not in message and message.startswith("rendering brax/ant needs")
    assert "libEGL (MUJOCO_GL=egl" in message and "libOSMesa" in message
    with pytest.raises(ValueError, match="Probe-OneStep-v0 cannot be rendered"):
        renderers.check_renderable("Probe-OneStep-v0")


@pytest.mark.slow
@pytest.mark.parametrize("env", ["brax/inverted_pendulum", "mjx/CartpoleBalance"])
def test_render_of_brax_and_mjx_by_mujoco(env, tmp_path, capsys):
    pytest.importorskip("brax" if env.startswith("brax") else "mujoco_playground")
    from ondevice_rl.train.run.runner import train_from_config

    config = get_algorithm("ppo").config(env=env, total_timesteps=512, hidden=(8,))
    run_dir = tmp_path / "run"
    limit = {"max_steps": 40}  # a short episode: MuJoCo draws on the CPU here
    train_from_config(config, seed=0, out_dir=run_dir, progress=False, env_params=limit)
    out = tmp_path / "episode.gif"
    assert main(["render", str(run_dir), "--out", str(out), "--scale", "0.5"]) == 0
    printed = capsys.readouterr().out
    assert "length" in printed
    frames = _gif_frames(out)
    assert len(frames) >= 2 and frames[0].shape == (120, 160, 3)
    assert all(frame.std() > 10 for frame in frames)  # a scene, not a blank
    assert np.abs(frames[-1].astype(int) - frames[0]).mean() > 0  # it moved


SLOW_EXPORTS = [
    ("a2c", "CartPole-v1", ()),
    ("dqn", "CartPole-v1", ()),
    ("pqn", "CartPole-v1", ()),
    ("ppo", "CartPole-v1", ("--normalize-obs",)),
    ("ppo", "Pendulum-v1", ("--normalize-obs",)),
    ("sac", "Pendulum-v1", ()),
    ("td3", "Pendulum-v1", ()),
    ("ppo", "CartPole-NoVel-v1", ("--memory", "gru", "--memory-size", "8")),
    ("a2c", "CartPole-NoVel-v1", ("--memory", "lstm", "--memory-size", "8")),
    ("pqn", "CartPole-NoVel-v1", ("--memory", "gru", "--memory-size", "8")),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    "algo, env, flags",
    SLOW_EXPORTS,
    ids=[" ".join([a, e, *f]) for a, e, f in SLOW_EXPORTS],
)
def test_export_of_every_learner_acts_as_load_policy(
    algo, env, flags, tmp_path, capsys
):
    run_dir = _train(tmp_path / "run", algo, env, *flags)
    printed, _ = _check_export(run_dir, tmp_path, capsys)
    if "--memory" in flags:  # the carry in, the carry out
        carry = "float32[b,8], float32[b,8]" if "lstm" in flags else "float32[b,8]"
        assert f"call(float32[b,2], {carry}) -> (int32[b], {carry})" in printed
