"""Episode metrics, reduced inside the program, and the one "final return".

Every learner reports, per update, ``episode_return`` and ``episode_length``
(the mean over the episodes that finished during the update's rollout; the
previous value if none did; the episodes still running until a first one
ends, so the curve never holds NaN) and ``episodes`` (how many finished).

``log_rows`` reduces ``[U]`` per-update metrics to one row per ``every``
updates inside the program, so that only the rows a run writes leave the
device.
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.devices.sharding import all_masked_mean, all_mean
from ondevice_rl.rollout import EpisodeInfo

EPISODE_METRICS = ("episode_return", "episode_length", "episodes")
#: Means over finished episodes: a row weighs each update by its ``episodes``.
PER_EPISODE = ("episode_return", "episode_length")
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


def log_rows(
    metrics: dict[str, jax.Array], every: int, sparse: tuple[str, ...] = ()
) -> dict[str, jax.Array]:
    """Per-update metrics ``[U]`` as ``R = ceil(U / every)`` rows ``[R]``,
    row ``r`` over updates ``r * every ... min((r + 1) * every, U) - 1`` (the
    last row may be shorter).

    * ``episode_return``, ``episode_length``: the mean over the episodes
      finished in the row's updates (each update weighted by its
      ``episodes``); NaN where none finished.
    * ``episodes``: how many finished in the row's updates (their sum).
    * ``sparse`` metrics (NaN by design between values, e.g. a periodic
      evaluation): the mean of the row's finite values, NaN if none.
    * every other metric: the mean over the row's updates.

    With ``every == 1`` each row is its update's values, bit for bit (the
    episode means NaN where no episode finished). ``every`` and ``U`` are
    static.
    """
    count = metrics["episodes"]
    if every == 1:
        finished = count > 0
        nan = jnp.float32(jnp.nan)
        return {
            k: jnp.where(finished, v, nan) if k in PER_EPISODE else v
            for k, v in metrics.items()
        }
    updates = count.shape[0]
    rows = -(-updates // every)
    pad = rows * every - updates

    def blocks(x: jax.Array) -> jax.Array:  # [U] -> [R, every], zeros padded
        return jnp.pad(x, (0, pad)).reshape(rows, every)

    counts = blocks(count)
    row_count = counts.sum(axis=1)
    weights = counts / jnp.maximum(row_count, 1.0)[:, None]
    present = blocks(jnp.ones((updates,), jnp.float32))
    out = {}
    for name, value in metrics.items():
        x = blocks(value.astype(jnp.float32))
        if name == "episodes":
            out[name] = row_count
        elif name in PER_EPISODE:
            mean = jnp.sum(jnp.where(counts > 0, x, 0.0) * weights, axis=1)
            out[name] = jnp.where(row_count > 0, mean, jnp.nan)
        else:
            valid = present * jnp.isfinite(x) if name in sparse else present
            n = valid.sum(axis=1)
            mean = jnp.sum(jnp.where(valid > 0, x, 0.0), axis=1) / jnp.maximum(n, 1)
            out[name] = jnp.where(n > 0, mean, jnp.nan)
    return out


def row_updates(start: int, length: int, every: int) -> np.ndarray:
    """``[R]`` int64: the (1-based) last update of each row ``log_rows``
    makes of updates ``start + 1 ... start + length``."""
    ends = np.arange(every, length + every, every, dtype=np.int64)
    return start + np.minimum(ends, length)
