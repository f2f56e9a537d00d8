"""``envpool-xla``: EnvPool's XLA interface stepped inside one jitted rollout.

EnvPool's ``xla()`` gives a ``step`` that XLA calls as a custom call, so the
policy and the C++ envs run in one compiled rollout with no Python per
step. EnvPool resets an env on the step after its episode ended, and a
compiled step cannot step the ended envs alone, so the rollout steps all
``B`` envs until each has ``T`` real transitions: an env's reset step is
not one, and an env that has its ``T`` while others catch up keeps
stepping, its extra transitions left out (its next rollout starts where it
is; the last kept transition bootstraps from its own next observation).
The learner's update is then the same jitted ``learn`` as every backend's.
Where EnvPool's step takes float64 (its MuJoCo tasks) the rollout is traced
with x64 on, everything it keeps cast to float32; its policy then draws its
noise in float64.
"""

import contextlib
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.rollout import Transition
from ondevice_rl.train.bench.host.learner import (
    REPLAYED_ACTS,
    REPLAYED_LEARNS,
    Recorder,
    act_seconds,
    host_learner,
    host_loop,
    host_record,
    replay_seconds,
)
from ondevice_rl.train.bench.host.sources import envpool_float64, envpool_make
from ondevice_rl.train.bench.transfers import TransferCounter


class Cursor(NamedTuple):
    """The envs between rollouts, on the device."""

    handle: Any
    obs: jax.Array  # [B, ...]
    reset_next: jax.Array  # [B] bool: the env's next step is its reset
    episode_return: jax.Array  # [B]
    key: jax.Array


def single(tree: Any) -> Any:
    """Floating leaves as float32 (the rollout may be traced with x64 on)."""

    def cast(x):
        return x.astype(jnp.float32) if jnp.issubdtype(x.dtype, jnp.floating) else x

    return jax.tree.map(cast, tree)


def make_rollout(
    pieces: Any, step: Any, num_envs: int, num_steps: int, action_dtype: Any
):
    """``rollout(cursor, params, norm) -> (cursor, traj [T, B], (returns sum,
    episodes ended, env steps taken))``, one jitted program; the env takes
    ``action_dtype`` actions (float64 needs the program traced with x64 on:
    ``x64_for``)."""
    B, T = num_envs, num_steps
    ids = jnp.arange(B, dtype=jnp.int32)

    def rollout(cursor: Cursor, params, norm):
        key, sample_key = jax.random.split(cursor.key)
        example = pieces.act(params, norm, cursor.obs, sample_key)
        row = single(Transition(cursor.obs, example[0], jnp.zeros(B),
                                jnp.zeros(B, bool), jnp.zeros(B, bool), cursor.obs,
                                example[2]))  # fmt: skip
        buffers = jax.tree.map(lambda x: jnp.zeros((T, *x.shape), x.dtype), row)

        def body(carry):
            cursor, buffers, count, ended_sum, ended_n, taken = carry
            key, sample_key = jax.random.split(cursor.key)
            action, env_action, extras = pieces.act(
                params, norm, cursor.obs, sample_key
            )
            env_action = env_action.astype(action_dtype)
            handle, (obs, reward, term, trunc, _) = step(cursor.handle, env_action, ids)
            obs = obs.astype(jnp.float32)
            reward = reward.astype(jnp.float32)
            real = ~cursor.reset_next
            slot = jnp.where(real & (count < T), count, T)  # T: dropped
            row = single(
                Transition(cursor.obs, action, reward, term, trunc, obs, extras)
            )
            buffers = jax.tree.map(
                lambda buf, x: buf.at[slot, ids].set(x, mode="drop"), buffers, row
            )
            ended = real & (term | trunc)
            episode_return = cursor.episode_return + jnp.where(real, reward, 0)
            ended_sum += jnp.sum(jnp.where(ended, episode_return, 0))
            ended_n += jnp.sum(ended, dtype=jnp.int32)
            episode_return = jnp.where(ended, 0, episode_return)
            cursor = Cursor(handle, obs, ended, episode_return, key)
            count = count + real.astype(jnp.int32)
            return cursor, buffers, count, ended_sum, ended_n, taken + B

        def unfinished(carry):
            return jnp.min(carry[2]) < T

        zero = jnp.zeros((), jnp.float32)
        start = (cursor._replace(key=key), buffers, jnp.zeros(B, jnp.int32), zero,
                 jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))  # fmt: skip
        cursor, traj, _, ended_sum, ended_n, taken = jax.lax.while_loop(
            unfinished, body, start
        )
        return cursor, traj, (ended_sum, ended_n, taken)

    return jax.jit(rollout)


def train_envpool_xla(trainer: Any, task: str, seed: int, discrete: bool) -> dict:
    """Trains ``trainer``'s learner on EnvPool's ``task`` through its XLA
    interface; returns the backend's record."""
    config = trainer.config
    B, T = config.num_envs, config.num_steps
    one_off = TransferCounter()  # the inputs once, the metrics once
    wide = envpool_float64(task)  # MuJoCo tasks: float64 actions in and out

    def x64():  # where EnvPool takes float64: its step made and traced so
        return jax.enable_x64(True) if wide else contextlib.nullcontext()

    env = envpool_make(task, B, seed)
    with x64():
        handle, _, _, step = env.xla()
    obs, _ = env.reset()
    learner = host_learner(trainer)
    action_dtype = np.int32 if discrete else np.float64 if wide else np.float32
    jitted = make_rollout(host_loop(trainer), step, B, T, action_dtype)

    def rollout(*args):
        with x64():
            return jitted(*args)

    hp = config.hyperparams
    init_key, key = jax.random.split(jax.random.PRNGKey(seed))
    state = trainer.init(init_key, hp)
    params, opt_state, norm = state.params, state.opt_state, state.normalizer
    start = (
        handle,
        np.asarray(obs, np.float32),
        np.zeros(B, bool),
        np.zeros(B, np.float32),
    )
    cursor = Cursor(*one_off.put(start), key)

    t0 = time.perf_counter()  # compile both programs outside the timed pass
    shapes = jax.eval_shape(rollout, cursor, params, norm)[1]
    jax.block_until_ready(rollout(cursor, params, norm))  # compiles it; one
    # rollout's steps taken outside the timed pass
    zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
    jax.block_until_ready(learner.learn(params, opt_state, norm, zeros, key, hp))
    compile_s = time.perf_counter() - t0

    acts, learns, stats = Recorder(REPLAYED_ACTS), Recorder(REPLAYED_LEARNS), []
    t0 = time.perf_counter()
    for _ in range(config.num_updates):
        cursor, traj, ended = rollout(cursor, params, norm)
        stats.append(ended)
        learns.add((params, opt_state, norm, traj, key, hp))
        if len(acts.inputs) < REPLAYED_ACTS:
            acts.inputs += [(params, norm, traj.obs[t], key) for t in range(T)]
        params, opt_state, norm, key = learner.learn(
            params, opt_state, norm, traj, key, hp
        )
    jax.block_until_ready(params)
    stats = one_off.get(stats)  # once, after the run
    wall = time.perf_counter() - t0
    env.close()
    taken = sum(int(steps) for *_, steps in stats)
    acts.calls = taken // B  # the policy acts once per step of all B envs
    busy = act_seconds(learner.act, acts) + replay_seconds(learner.learn, learns)
    update_returns, last = [], float("nan")
    for ended_sum, ended_n, _ in stats:
        last = float(ended_sum / ended_n) if ended_n else last
        update_returns.append(last)
    record = host_record(
        config, wall, compile_s, update_returns, TransferCounter(), busy, []
    )
    return dict(record, one_off_transfers=one_off.total, env_steps_taken=taken)
