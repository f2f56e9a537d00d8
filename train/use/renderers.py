"""How each family of environments is drawn, headless, from our states.

* classic control (the native ports and their ``gymnax/...`` twins):
  gymnasium's own renderer, set to each of our states (``envs/
  gymnasium_sync.py``); needs pygame (``pip install 'ondevice_rl[render]'``);
* ``brax/...`` and ``mjx/...``: MuJoCo's renderer (``mujoco.Renderer``, the
  one ``brax.io.image`` and Playground's ``render`` use) on the env's
  ``MjModel``, the state's positions and velocities copied into an
  ``MjData``; needs a headless OpenGL: EGL (``MUJOCO_GL=egl``, chosen when
  unset and ``libEGL`` is there) or OSMesa (``MUJOCO_GL=osmesa``);
* ``gymnax/*-MinAtar``: the observation's ``[10, 10, C]`` channels as a
  grid, each cell in the colour of its highest active channel (as
  MinAtar's own display; here ``tab10``'s colours, which all stand out on
  black), black where none is.

``check_renderable(env_name)`` says in one line, before anything loads, why
an env cannot be drawn here; ``renderer_for(env_name, env, env_params)``
gives a ``draw(state, action=None) -> [H, W, 3]`` uint8 object.
"""

import ctypes.util
import os
import sys
from types import SimpleNamespace
from typing import Any

import gymnasium as gym
import jax
import numpy as np

from ondevice_rl.envs.gymnasium_sync import SYNC_FUNCTIONS

#: Frame size of the MuJoCo renderer (brax.io.image's default).
MUJOCO_FRAME = (240, 320)
#: Pixels per MinAtar cell.
MINATAR_CELL = 16
#: The headless OpenGL platforms MuJoCo can use, with the library each needs.
HEADLESS_GL = {"egl": "EGL", "osmesa": "OSMesa"}
NO_GL = (
    "needs a headless OpenGL library: libEGL (MUJOCO_GL=egl; e.g. apt install "
    "libegl1) or libOSMesa (MUJOCO_GL=osmesa; e.g. apt install libosmesa6)"
)


def _gymnax_acrobot(state: Any) -> Any:
    return SimpleNamespace(
        theta1=state.joint_angle1,
        theta2=state.joint_angle2,
        dtheta1=state.velocity_1,
        dtheta2=state.velocity_2,
        time=state.time,
    )


def _same(state: Any) -> Any:
    return state


#: Classic-control env name -> (gymnasium id, our state -> the sync function's).
GYMNASIUM_DRAWN: dict[str, tuple[str, Any]] = {
    **{name: (name, _same) for name in SYNC_FUNCTIONS},
    **{f"gymnax/{name}": (name, _same) for name in SYNC_FUNCTIONS},
    "gymnax/Acrobot-v1": ("Acrobot-v1", _gymnax_acrobot),
}
RENDERABLE_FAMILIES = "classic control, gymnax/*-MinAtar, brax/*, mjx/*"

_SDL_QUIET = {
    "PYGAME_HIDE_SUPPORT_PROMPT": "1",
    "SDL_VIDEODRIVER": "dummy",
    "SDL_AUDIODRIVER": "dummy",
}


def _family(env_name: str) -> str | None:
    if env_name in GYMNASIUM_DRAWN:
        return "gymnasium"
    if env_name.startswith("gymnax/") and env_name.endswith("-MinAtar"):
        return "minatar"
    if env_name.startswith(("brax/", "mjx/")):
        return "mujoco"
    return None


def check_renderable(env_name: str) -> None:
    """ValueError, one line, if ``env_name`` cannot be drawn here: not a
    family above, or its renderer's library missing."""
    family = _family(env_name)
    if family is None:
        raise ValueError(
            f"{env_name} cannot be rendered (renderable: {RENDERABLE_FAMILIES})"
        )
    if family == "gymnasium":
        for name, value in _SDL_QUIET.items():  # no window, sound or greeting
            os.environ.setdefault(name, value)
        try:  # lazy: pygame is an optional extra, quieted by the SDL settings above
            import pygame  # noqa: F401
        except ImportError:
            raise ValueError(
                f"rendering {env_name} needs pygame: pip install "
                "'ondevice_rl[render]' (or pip install pygame)"
            ) from None
    if family == "mujoco":
        use_headless_gl(env_name)


def use_headless_gl(env_name: str) -> str:
    """Points MuJoCo at a headless OpenGL (``MUJOCO_GL``; as set, else EGL,
    else OSMesa, whichever library is found) and returns its name."""
    chosen = os.environ.get("MUJOCO_GL", "").strip().lower()
    if chosen not in HEADLESS_GL:
        found = [gl for gl, lib in HEADLESS_GL.items() if ctypes.util.find_library(lib)]
        if not found:
            raise ValueError(f"rendering {env_name} {NO_GL}; neither was found")
        chosen = os.environ["MUJOCO_GL"] = found[0]
    if "mujoco" in sys.modules:
        # MuJoCo picks its GL when first imported (brax and Playground import
        # it with the env); one picked without MUJOCO_GL needs a display.
        # lazy: mujoco is an optional extra (brax, mjx)
        from mujoco.rendering.classic import gl_context

        if chosen == "egl":
            from mujoco.egl import GLContext
        else:
            from mujoco.osmesa import GLContext
        gl_context.GLContext = GLContext
    return chosen


class GymnasiumRenderer:
    """Our classic-control states drawn by gymnasium's renderer."""

    def __init__(self, env_name: str):
        gym_id, self.adapt = GYMNASIUM_DRAWN[env_name]
        self.sync = SYNC_FUNCTIONS[gym_id]
        self.env = gym.make(gym_id, render_mode="rgb_array")
        self.env.reset(seed=0)
        self.fps = int(self.env.metadata.get("render_fps", 30))

    def draw(self, state: Any, action: Any = None) -> np.ndarray:
        self.sync(self.env, self.adapt(state))
        unwrapped = self.env.unwrapped
        if action is not None and hasattr(unwrapped, "last_u"):
            unwrapped.last_u = float(np.asarray(action).reshape(-1)[0])  # Pendulum
        return np.asarray(self.env.render(), np.uint8)

    def close(self) -> None:
        self.env.close()


class MujocoRenderer:
    """brax and MJX states drawn by ``mujoco.Renderer`` (headless GL)."""

    def __init__(self, env_name: str, env: Any):
        import mujoco  # lazy: an optional extra (brax, mjx)

        gl = use_headless_gl(env_name)
        self.mj_forward = mujoco.mj_forward
        inner = env.inner
        self.brax = env_name.startswith("brax/")
        self.model = inner.sys.mj_model if self.brax else inner.mj_model
        self.data = mujoco.MjData(self.model)
        try:
            self.renderer = mujoco.Renderer(self.model, *MUJOCO_FRAME)
        except Exception as e:  # the GL library's own errors: of many kinds
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise ValueError(
                f"rendering {env_name}: no OpenGL context with MUJOCO_GL={gl} "
                f"({first}); it {NO_GL}"
            ) from None
        self.camera = 0 if self.model.ncam > 0 else -1  # the model's first, or free
        self.fps = max(1, round(1.0 / float(inner.dt)))

    def draw(self, state: Any, action: Any = None) -> np.ndarray:
        data = self.data
        if self.brax:
            pipeline = state.brax_state.pipeline_state
            data.qpos, data.qvel = pipeline.q, pipeline.qd
        else:
            mjx = state.mjx_state.data
            data.qpos, data.qvel = mjx.qpos, mjx.qvel
            data.mocap_pos, data.mocap_quat = mjx.mocap_pos, mjx.mocap_quat
        self.mj_forward(self.model, data)
        self.renderer.update_scene(data, camera=self.camera)
        return np.asarray(self.renderer.render(), np.uint8)

    def close(self) -> None:
        self.renderer.close()


def minatar_palette(channels: int) -> np.ndarray:
    """``[channels + 1, 3]`` uint8: black, then one colour per channel
    (``tab10``'s, repeated past ten)."""
    from matplotlib import colormaps  # lazy: MinAtar's alone; matplotlib: 0.6 s

    colours = np.asarray(colormaps["tab10"].colors)[np.arange(channels) % 10]
    return np.concatenate([np.zeros((1, 3)), colours * 255]).round().astype(np.uint8)


class MinAtarRenderer:
    """gymnax MinAtar states drawn as their observation's channel grid."""

    def __init__(self, env: Any, env_params: Any):
        gymnax_env = env.gymnax_env
        params = env_params.env_params
        self.observe = jax.jit(lambda state: gymnax_env.get_obs(state, params))
        self.palette = None
        self.fps = 10

    def draw(self, state: Any, action: Any = None) -> np.ndarray:
        obs = np.asarray(self.observe(state)) > 0  # [H, W, C]
        if self.palette is None:
            self.palette = minatar_palette(obs.shape[-1])
        # The highest active channel wins (MinAtar's display); 0: none.
        index = (obs * np.arange(1, obs.shape[-1] + 1)).max(axis=-1)
        image = self.palette[index]
        image = image.repeat(MINATAR_CELL, axis=0).repeat(MINATAR_CELL, axis=1)
        image[::MINATAR_CELL] = 40  # grid lines
        image[:, ::MINATAR_CELL] = 40
        return image

    def close(self) -> None:
        pass


def renderer_for(env_name: str, env: Any = None, env_params: Any = None) -> Any:
    """The renderer of ``env_name`` (``env``: its unwrapped env, and
    ``env_params`` its params, for MinAtar, brax and MJX); ValueError, one
    line, as ``check_renderable``."""
    check_renderable(env_name)
    family = _family(env_name)
    if family == "gymnasium":
        return GymnasiumRenderer(env_name)
    if family == "minatar":
        return MinAtarRenderer(env, env_params)
    return MujocoRenderer(env_name, env)
