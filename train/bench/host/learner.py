"""The fused program's learner, driven from the host.

``host_loop(trainer)`` takes an on-policy learner of ``LEARNERS`` apart
(``HostLoop``): ``act`` samples actions for host observations as the fused
rollout does, ``prepare`` and ``learn`` run what the fused update runs on a
rollout (normalisation, returns, the optimiser steps: the on-policy kit's
``on_policy_learn``), at the config's matmul precision; ``host_learner``
jits them. ``train_on_host`` feeds them ``[T, B]`` trajectories from a host
backend (``sources.py``); every transfer goes through a
``TransferCounter``, so the counts are exact.

The device's busy share is measured after the timed pass, on inputs
recorded during it (so the timed pass keeps whatever overlap it had): the
policy's work as one scan over the recorded observations, the updates
replayed back to back; their time over the timed pass's wall time.
"""

import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.env.masks import split_action_mask
from ondevice_rl.metrics import final_return
from ondevice_rl.nn.precision import at_matmul_precision
from ondevice_rl.normalize import normalize_obs, normalize_rollout
from ondevice_rl.rollout import Transition
from ondevice_rl.train import a2c, ppo
from ondevice_rl.train.bench.transfers import TransferCounter
from ondevice_rl.train.kit.on_policy import on_policy_learn
from ondevice_rl.train.kit.registry import algorithm_of

#: The learners ``bench host`` drives: their part of the on-policy update,
#: ``make_learner(config, setup) -> OnPolicyLearner``.
LEARNERS = {"ppo": ppo.make_learner, "a2c": a2c.make_learner}

#: Act calls replayed for the busy share (the rest scaled from them).
REPLAYED_ACTS = 2_000
#: Learn calls replayed for the busy share.
REPLAYED_LEARNS = 5


class HostLoop(NamedTuple):
    """An on-policy learner's update in the pieces a host loop drives.

    ``act(params, normalizer, obs [B, *obs_shape], key) -> (action,
    env_action, extras)`` samples from the policy as the rollout does (the
    raw observations standardised with the normalizer's statistics);
    ``prepare(normalizer, traj [T, B], hp) -> (normalizer, traj)`` is what
    the fused update does to a raw rollout before learning (standardise,
    update the statistics, scale rewards); ``learn(params, opt_state, traj
    [T, B], key, hp) -> (params, opt_state, stats)`` is the learner's update
    on one rollout.
    """

    act: Callable
    prepare: Callable
    learn: Callable


def host_loop(trainer: Any) -> HostLoop:
    """The ``HostLoop`` of ``trainer``'s learner (one of ``LEARNERS``, with
    no memory), ``act`` and ``learn`` at the config's matmul precision."""
    config = trainer.config
    learner = LEARNERS[algorithm_of(config).name](config, trainer.setup)
    agent = learner.agent

    def act(params, norm, obs, key):
        out = agent.step(params, (), normalize_obs(norm, obs), None)[1]
        return learner.act(out, key, None, 0, split_action_mask(obs)[1])

    def prepare(norm, traj, hp):
        return normalize_rollout(norm, traj, hp.gamma)

    def at(fn):
        return at_matmul_precision(fn, config.matmul_precision)

    return HostLoop(at(act), prepare, at(on_policy_learn(config, learner)))


class HostLearner(NamedTuple):
    """``act(params, norm, obs [B, ...], key) -> ((env_action, action,
    extras), key)`` and ``learn(params, opt_state, norm, traj [T, B], key,
    hp) -> (params, opt_state, norm, key)``, both jitted."""

    act: Callable
    learn: Callable


#: ``id(trainer) -> (trainer, HostLearner)``: backends of one config share
#: their compiled programs (``trainer_for`` builds one trainer per config).
_COMPILED: dict[int, tuple[Any, HostLearner]] = {}


def host_learner(trainer: Any) -> HostLearner:
    """The learner's ``HostLoop`` pieces as two jitted programs."""
    if id(trainer) in _COMPILED:
        return _COMPILED[id(trainer)][1]
    pieces = host_loop(trainer)

    @jax.jit
    def act(params, norm, obs, key):
        key, sample_key = jax.random.split(key)
        action, env_action, extras = pieces.act(params, norm, obs, sample_key)
        return (env_action, action, extras), key

    @jax.jit
    def learn(params, opt_state, norm, traj, key, hp):
        key, learn_key = jax.random.split(key)
        norm, traj = pieces.prepare(norm, traj, hp)
        params, opt_state, _ = pieces.learn(params, opt_state, traj, learn_key, hp)
        return params, opt_state, norm, key

    _COMPILED[id(trainer)] = (trainer, HostLearner(act, learn))
    return _COMPILED[id(trainer)][1]


class Collected(NamedTuple):
    """One rollout from a host backend, host NumPy."""

    traj: Transition  # [T, B, ...]
    returns: list  # returns of the episodes that ended in it
    lags: list  # per transition: updates between acting and learning


def stack_steps(steps: list) -> Any:
    """``[T]`` per-step pytrees of ``[B, ...]`` arrays → one of ``[T, B, ...]``."""
    return jax.tree.map(lambda *xs: np.stack(xs), *steps)


class Recorder:
    """Counts calls and keeps the first ``limit`` inputs for the replay."""

    def __init__(self, limit: int):
        self.calls, self.inputs, self.limit = 0, [], limit

    def add(self, inputs: Any) -> None:
        self.calls += 1
        if len(self.inputs) < self.limit:
            self.inputs.append(inputs)


def replay_seconds(fn: Callable, recorder: Recorder) -> float:
    """Seconds ``fn`` takes over all ``recorder.calls`` calls, from its
    recorded inputs run back to back (scaled when only some were kept)."""
    if not recorder.inputs:
        return 0.0
    jax.block_until_ready(fn(*recorder.inputs[0]))  # compiled already; warm
    t0 = time.perf_counter()
    out = [fn(*inputs) for inputs in recorder.inputs]
    jax.block_until_ready(out)
    return (time.perf_counter() - t0) * recorder.calls / len(recorder.inputs)


def act_seconds(act: Callable, recorder: Recorder) -> float:
    """Seconds of compiled policy work over all ``recorder.calls`` calls:
    the recorded observations ``[N, n, ...]`` acted on in one ``lax.scan``
    (one dispatch), so the host's per-call dispatch, which a device does
    not spend busy, is left out."""
    if not recorder.inputs:
        return 0.0
    params, norm, _, key = recorder.inputs[-1]
    obs = jnp.stack([jnp.asarray(inputs[2]) for inputs in recorder.inputs])

    @jax.jit
    def acts(params, norm, obs, key):
        def one(key, o):
            out, key = act(params, norm, o, key)
            return key, out

        return jax.lax.scan(one, key, obs)

    jax.block_until_ready(acts(params, norm, obs, key))  # compile, warm
    t0 = time.perf_counter()
    jax.block_until_ready(acts(params, norm, obs, key))
    return (time.perf_counter() - t0) * recorder.calls / len(recorder.inputs)


def train_on_host(
    trainer: Any, source: Any, seed: int, counter: TransferCounter | None = None
) -> dict:
    """Trains ``trainer``'s learner on ``source``'s host envs for its
    config's ``num_updates``; returns the backend's record."""
    config = trainer.config
    counter = TransferCounter() if counter is None else counter
    learner = host_learner(trainer)
    hp = config.hyperparams
    init_key, key = jax.random.split(jax.random.PRNGKey(seed))
    state = trainer.init(init_key, hp)  # its envs are unused: the host's run
    params, opt_state, norm = state.params, state.opt_state, state.normalizer
    acts, learns = Recorder(REPLAYED_ACTS), Recorder(REPLAYED_LEARNS)
    update = 0

    def policy(obs: np.ndarray):
        nonlocal key
        obs = counter.as_argument(np.asarray(obs, np.float32))
        acts.add((params, norm, obs, key))
        out, key = learner.act(params, norm, obs, key)
        return counter.get(out)

    t0 = time.perf_counter()
    warm_up(
        learner,
        (params, opt_state, norm, key, hp),
        source.act_batches,
        config,
        trainer.setup.obs_shape,
    )
    compile_s = time.perf_counter() - t0

    update_returns, lags, last = [], [], float("nan")
    t0 = time.perf_counter()
    for update in range(config.num_updates):
        got = source.collect(policy, config.num_steps, update)
        traj = counter.put(got.traj)
        learns.add((params, opt_state, norm, traj, key, hp))
        params, opt_state, norm, key = learner.learn(
            params, opt_state, norm, traj, key, hp
        )
        last = float(np.mean(got.returns)) if got.returns else last
        update_returns.append(last)
        lags += got.lags
    jax.block_until_ready(params)
    wall = time.perf_counter() - t0
    source.close()
    busy = act_seconds(learner.act, acts) + replay_seconds(learner.learn, learns)
    return host_record(config, wall, compile_s, update_returns, counter, busy, lags)


def finished_only(update_returns: list) -> np.ndarray:
    """The per-update returns from the first update in which an episode
    ended (before it there is no return to average)."""
    returns = np.asarray(update_returns, np.float64)
    ended = np.flatnonzero(~np.isnan(returns))
    return returns[ended[0] :] if ended.size else returns


def host_record(config, wall, compile_s, update_returns, counter, busy, lags) -> dict:
    """A backend's figures: env steps are the transitions the learner took."""
    updates = config.num_updates
    env_steps = updates * config.steps_per_update
    transfers = counter.total if counter is not None else 0
    return dict(
        timesteps=env_steps,
        updates=updates,
        compile_s=round(compile_s, 3),
        run_s=round(wall, 3),
        sps=round(env_steps / wall),
        updates_per_s=round(updates / wall, 2),
        final_return=round(final_return(finished_only(update_returns)), 1),
        transfers=counter.as_dict() if counter is not None else None,
        transfers_per_update=round(transfers / updates, 2),
        busy_share=round(min(1.0, busy / wall), 4),
        policy_lag=round(float(np.mean(lags)), 3) if lags else 0.0,
    )


def warm_up(learner, inputs, act_batches, config, obs_shape) -> None:
    """Compiles ``act`` for each batch size the backend acts on and
    ``learn`` for a ``[T, B]`` rollout (zeros), outside the timed pass."""
    params, opt_state, norm, key, hp = inputs
    T, B = config.num_steps, config.num_envs
    for n in act_batches:
        out, _ = learner.act(params, norm, np.zeros((n, *obs_shape), np.float32), key)
    _, action, extras = jax.device_get(out)

    def zeros(x, dtype=None):
        x = np.asarray(x)
        return np.zeros((T, B, *x.shape[1:]), dtype or x.dtype)

    obs = np.zeros((T, B, *obs_shape), np.float32)
    traj = Transition(
        obs, zeros(action), np.zeros((T, B), np.float32), np.zeros((T, B), bool),
        np.zeros((T, B), bool), obs, jax.tree.map(zeros, extras),
    )  # fmt: skip
    jax.block_until_ready(learner.learn(params, opt_state, norm, traj, key, hp))
