"""Episode metrics, reduced inside the program, and the one "final return".

Every learner reports, per update, ``episode_return`` and ``episode_length``
(the mean over the episodes that finished during the update's rollout; the
previous value if none did; the episodes still running until a first one
ends, so the curve never holds NaN) and ``episodes`` (how many finished).
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.rollout import EpisodeInfo
from ondevice_rl.sharding import all_masked_mean, all_mean

EPISODE_METRICS = ("episode_return", "episode_length", "episodes")
#: ``final_return`` is the mean episode return of the last this many updates.
FINAL_WINDOW = 10


class EpisodeTracker(NamedTuple):
    """The latest finished episodes' mean return and length (NaN: none yet)."""

    last_return: jax.Array  # [] float32
    last_length: jax.Array  # [] float32

    @classmethod
    def create(cls) -> "EpisodeTracker":
        nan = jnp.float32(jnp.nan)
        return cls(nan, nan)


def masked_mean(
    x: jax.Array, mask: jax.Array, fallback: jax.Array, axis_name: str | None = None
) -> jax.Array:
    """Mean of ``x`` where ``mask`` (over devices on ``axis_name``), else
    ``fallback``."""
    if axis_name is not None:
        return all_masked_mean(x, mask, fallback, axis_name)
    count = mask.sum()
    mean = jnp.where(mask, x, 0.0).sum() / jnp.maximum(count, 1)
    return jnp.where(count > 0, mean, fallback).astype(jnp.float32)


def episode_metrics(
    episodes: EpisodeInfo,
    env_state: Any,
    tracker: EpisodeTracker,
    axis_name: str | None = None,
) -> tuple[EpisodeTracker, dict[str, jax.Array]]:
    """One update's episode metrics (scalars) and the updated tracker.

    Args:
        episodes: ``[T, B]`` episode ends of the update's rollout.
        env_state: the batched ``EpisodeStats`` state after the rollout (its
            running ``episode_return``/``episode_length`` stand in until a
            first episode ends).
        tracker: the previous update's tracker.
        axis_name: average over this device axis (data-parallel runs).
    """
    done = episodes.done
    last_return = masked_mean(episodes.returns, done, tracker.last_return, axis_name)
    last_length = masked_mean(episodes.lengths, done, tracker.last_length, axis_name)
    running = (
        env_state.episode_return.mean(),
        env_state.episode_length.mean().astype(jnp.float32),
    )
    if axis_name is not None:
        running = all_mean(running, axis_name)
    count = done.sum().astype(jnp.float32)
    if axis_name is not None:
        count = jax.lax.psum(count, axis_name)
    metrics = {
        "episode_return": jnp.where(jnp.isnan(last_return), running[0], last_return),
        "episode_length": jnp.where(jnp.isnan(last_length), running[1], last_length),
        "episodes": count,
    }
    return EpisodeTracker(last_return, last_length), metrics


def final_return(returns: Any, window: int = FINAL_WINDOW) -> float | np.ndarray:
    """The mean ``episode_return`` of the last ``window`` updates.

    ``returns`` is ``[..., U]`` (host array); the result has the leading
    shape (a float for one run), NaN where no update completed.
    """
    returns = np.asarray(returns, np.float64)
    if returns.shape[-1] == 0:
        out = np.full(returns.shape[:-1], np.nan)
    else:
        out = returns[..., -window:].mean(axis=-1)
    return float(out) if out.ndim == 0 else out
