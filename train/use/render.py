"""Watch a trained policy: one episode drawn to a GIF or an MP4.

The episode runs on the device: our env (wrappers stripped) stepped by the
trained policy in one jitted ``lax.scan`` up to the time limit, with
done-masking, returning every state. Frames are then drawn on the host by
the env family's own renderer (``train/use/renderers.py``): gymnasium's for
classic control, MuJoCo's (headless OpenGL) for brax and MJX, a channel grid
for MinAtar. Other envs (probes, bsuite) cannot be rendered, which
``check_renderable`` says in one line before anything loads.

GIFs are written with Pillow; MP4s with an ffmpeg executable, from
imageio-ffmpeg or matplotlib's ``animation.ffmpeg_path``.
"""

import shutil
import subprocess
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.train.services.writes import write_whole
from ondevice_rl.train.use.loading import load_run, load_spec
from ondevice_rl.train.use.renderers import check_renderable, renderer_for


def episode(policy, params, env, env_params, key, deterministic, max_steps, carry=()):
    """One episode of ``policy(params, carry, obs, key, deterministic) ->
    (action, carry)``, jitted: ``(state0, states, actions, rewards, active)``
    with leading axis ``[max_steps]``; step ``t`` belongs to the episode
    where ``active[t]`` (its length is ``active.sum()``)."""
    env = getattr(env, "unwrapped", env)

    def run(params, key):
        reset_key, key = jax.random.split(key)
        obs, state = env.reset(reset_key, env_params)

        def one_step(loop, _):
            state, obs, done, key, carry = loop
            key, act_key, step_key = jax.random.split(key, 3)
            action, carry = policy(params, carry, obs, act_key, deterministic)
            ts = env.step(step_key, state, action, env_params)
            active = ~done
            keep = jax.tree.map(lambda a, b: jnp.where(active, a, b), ts.state, state)
            obs = jax.tree.map(lambda a, b: jnp.where(active, a, b), ts.obs, obs)
            done = done | ts.terminated | ts.truncated
            reward = jnp.where(active, ts.reward, 0.0)
            return (keep, obs, done, key, carry), (keep, action, reward, active)

        loop = (state, obs, jnp.bool_(False), key, carry)
        _, steps = jax.lax.scan(one_step, loop, None, length=max_steps)
        return (state, *steps)

    return jax.device_get(jax.jit(run)(params, key))


NO_FFMPEG = (
    "writing .mp4 needs ffmpeg: pip install imageio-ffmpeg (or "
    "'ondevice_rl[render]'), or write a .gif"
)


def ffmpeg_executable() -> str | None:
    """imageio-ffmpeg's bundled ffmpeg, else matplotlib's ffmpeg if on PATH."""
    try:  # lazy: imageio-ffmpeg is an optional extra
        import imageio_ffmpeg

        return imageio_ffmpeg.get_ffmpeg_exe()
    except (ImportError, RuntimeError):
        pass
    from matplotlib import rcParams  # lazy: a fallback; matplotlib costs 0.6 s

    return shutil.which(rcParams["animation.ffmpeg_path"])


def write_video(frames: list[np.ndarray], path: Path, fps: int) -> Path:
    """``.gif`` (Pillow) or ``.mp4`` (ffmpeg) of ``[H, W, 3]`` uint8 frames;
    ValueError (one line) for another suffix or a missing encoder."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".gif":
        from PIL import Image  # lazy: Pillow is matplotlib's dependency, not declared

        # One palette for all frames, from a few spread over the episode, no
        # dithering: far smaller files than a palette (and noise) per frame.
        picks = np.linspace(0, len(frames) - 1, min(8, len(frames))).astype(int)
        sample = Image.fromarray(np.concatenate([frames[i] for i in picks]))
        none = Image.Dither.NONE
        palette = sample.quantize(colors=64, dither=none)
        images = [
            Image.fromarray(f).quantize(palette=palette, dither=none) for f in frames
        ]
        duration = max(20, round(1000 / fps / 10) * 10)  # GIFs count in 10 ms
        images[0].save(
            path, save_all=True, append_images=images[1:], duration=duration, loop=0
        )
        return path
    if suffix != ".mp4":
        raise ValueError(f"--out {path}: write a .gif or an .mp4")
    exe = ffmpeg_executable()
    if exe is None:
        raise ValueError(NO_FFMPEG)
    height, width, _ = frames[0].shape
    command = [
        exe, "-y", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24",
        "-s", f"{width}x{height}", "-r", str(fps), "-i", "-", "-an",
        "-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2", "-vcodec", "libx264",
        "-pix_fmt", "yuv420p", str(path),
    ]  # fmt: skip
    done = subprocess.run(
        command, input=np.stack(frames).tobytes(), capture_output=True
    )
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        raise ValueError(
            f"ffmpeg failed: {message[-1] if message else done.returncode}"
        )
    return path


def _resized(frame: np.ndarray, scale: float) -> np.ndarray:
    from PIL import Image  # lazy: as in write_video

    height, width, _ = frame.shape
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    return np.asarray(Image.fromarray(frame).resize(size, Image.BOX))


def render_run(
    run_dir: str | Path,
    out: str | Path,
    seed: int = 0,
    deterministic: bool = False,
    fps: int | None = None,
    scale: float = 1.0,
    member: int | str | None = None,
) -> dict:
    """Renders one episode of ``run_dir``'s trained policy to ``out`` (``.gif``
    or ``.mp4``), frames resized by ``scale``; returns ``{"path", "frames",
    "return", "length"}``. ValueError (one line) for a run or env that cannot
    be rendered. A sweep directory takes ``member`` (its number or "best")."""
    out = Path(out)
    if out.suffix.lower() not in (".gif", ".mp4"):
        raise ValueError(f"--out {out}: write a .gif or an .mp4")
    if not 0 < scale <= 4:
        raise ValueError(f"--scale must be in (0, 4], got {scale}")
    if out.suffix.lower() == ".mp4" and ffmpeg_executable() is None:
        raise ValueError(NO_FFMPEG)  # before any work
    env_name = load_spec(run_dir, member).config.env
    check_renderable(env_name)  # the env and its renderer's library: first
    run = load_run(run_dir, member=member)
    trainer = run.trainer
    env_params = run.spec.env_params_tree()
    if env_params is None:
        env_params = trainer.default_env_params
    env = getattr(trainer.env, "unwrapped", trainer.env)
    renderer = renderer_for(env_name, env, env_params)
    try:
        max_steps = int(env_params.max_steps)
        state0, states, actions, rewards, active = episode(
            trainer.policy,
            run.params,
            env,
            env_params,
            jax.random.key(seed),
            deterministic,
            max_steps,
            trainer.initial_carry(()),
        )
        length = int(active.sum())
        frames = [renderer.draw(state0)]
        for t in range(length):
            at = jax.tree.map(lambda x, t=t: x[t], (states, actions))
            frames.append(renderer.draw(*at))
        if scale != 1.0:
            frames = [_resized(f, scale) for f in frames]
        write_whole(out, lambda tmp: write_video(frames, tmp, fps or renderer.fps))
    finally:
        renderer.close()
    return {
        "path": out,
        "frames": len(frames),
        "return": float(rewards.sum()),
        "length": length,
    }
