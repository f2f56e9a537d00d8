"""The replay update, written once: act → store → learn from replay →
report, scanned over updates.

A learner (DQN, SAC, TD3) supplies a ``ReplayLearner``: how it acts while
collecting, its gradient steps on sampled sequences, what it does every
update after them (DQN's target copies) and the metrics it adds.
``replay_trainer`` builds the whole ``Trainer`` around them. Each update:

* ``config.vector_steps`` vector steps of ``config.num_envs`` envs through
  the generic rollout, stored as they are (raw observations) in the replay
  buffer (``train/kit/replay.py``), which lives in the train state's
  ``extra.buffer``: scanned, vmapped over seeds, sharded and checkpointed
  with the rest;
* with ``normalize_obs``, the running statistics take in the observations
  acted in;
* once ``config.learning_starts`` env steps have been taken and
  ``config.n_step`` steps are stored, the learner's gradient steps, under
  ``cond_or_select`` (``train/kit/branches.py``);
* the learner's ``settle``, then the episode metrics, the learner's stats
  and its ``report``.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.normalize import RunningStats
from ondevice_rl.normalize import update as update_stats
from ondevice_rl.rollout import rollout
from ondevice_rl.train.kit.branches import cond_or_select
from ondevice_rl.train.kit.env_setup import EnvSetup
from ondevice_rl.train.kit.protocol import Trainer, feed_forward_trainer
from ondevice_rl.train.kit.replay import empty_buffer
from ondevice_rl.train.kit.state import TrainState, advanced


class ReplayLearner(NamedTuple):
    """What is a learner's own in the replay update.

    Attributes:
        network: the module that acts (``Trainer.network``).
        init: ``(key, hp, env_params=None) -> TrainState``, its ``extra`` a
            NamedTuple of the learner's own fields with ``buffer=()`` (the
            loop puts the empty buffer there).
        collect: ``(state, hp, env_steps) -> (act, act_params)``: this
            update's ``act(act_params, obs [B, ...], key) -> (action,
            env_action, extras)`` for the rollout, and its params; the
            buffer stores ``action``.
        learn: ``(state, buffer, key, hp) -> ((params, opt_state, extra),
            stats)``: one update's gradient steps on sequences sampled from
            ``buffer``; ``state`` holds the update's obs statistics and no
            buffer (``extra.buffer`` is ``()``); ``stats`` a NamedTuple of
            scalars.
        stats: the class of those stats (zeros until learning starts).
        policy: the trained policy.
        settle: ``(params, extra, hp, env_steps, episodes) -> extra``, every
            update after learning; ``episodes`` the rollout's ``[T, B]``
            ends.
        report: ``(extra, metrics, hp, env_steps) -> dict``, metrics to add
            to the update's (or to replace).
    """

    network: Any
    init: Callable
    collect: Callable
    learn: Callable
    stats: type
    policy: Callable
    settle: Callable = lambda params, extra, hp, env_steps, episodes: extra
    report: Callable = lambda extra, metrics, hp, env_steps: {}


def replay_trainer(config: Any, setup: EnvSetup, learner: ReplayLearner) -> Trainer:
    """The ``Trainer`` of a learner that learns from a replay buffer.

    ``config`` has ``num_envs``, ``vector_steps``, ``steps_per_update``,
    ``buffer_capacity``, ``learning_starts`` and ``n_step``
    (``ReplaySizes``).
    """
    vector_steps, steps_per_update = config.vector_steps, config.steps_per_update
    no_stats = learner.stats(*(jnp.float32(0.0) for _ in learner.stats._fields))

    def init(key, hp, env_params=None) -> TrainState:
        state = learner.init(key, hp, env_params)
        buffer = empty_buffer(setup, config.num_envs, config.buffer_capacity)
        return state._replace(extra=state.extra._replace(buffer=buffer))

    def update(state: TrainState, hp, env_params=None):
        env_params = setup.default_params if env_params is None else env_params
        env_steps = state.update_step * steps_per_update
        act, act_params = learner.collect(state, hp, env_steps)
        rollout_state, traj, episodes = rollout(
            setup.env, env_params, act, act_params, state.rollout, vector_steps
        )
        buffer = state.extra.buffer.add(traj)
        normalizer = state.normalizer
        if isinstance(normalizer.obs, RunningStats):
            normalizer = normalizer._replace(obs=update_stats(normalizer.obs, traj.obs))
        key, learn_key = jax.random.split(rollout_state.key)
        ready = (env_steps + steps_per_update >= config.learning_starts) & (
            buffer.can_sample(config.n_step)
        )
        # The buffer stays out of the conditional's outputs: no branch changes it.
        learning = state._replace(
            normalizer=normalizer, extra=state.extra._replace(buffer=())
        )
        (params, opt_state, extra), stats = cond_or_select(
            ready,
            lambda: learner.learn(learning, buffer, learn_key, hp),
            lambda: ((state.params, state.opt_state, learning.extra), no_stats),
        )
        extra = learner.settle(params, extra, hp, env_steps, episodes)
        new_state, metrics = advanced(
            state, rollout_state, key, episodes,
            params=params, opt_state=opt_state, normalizer=normalizer,
            extra=extra._replace(buffer=buffer),
        )  # fmt: skip
        report = learner.report(extra, metrics, hp, env_steps)
        return new_state, {**metrics, **stats._asdict(), **report}

    return feed_forward_trainer(
        config, setup, learner.network, init, update, learner.policy
    )
