"""The on-policy update, written once: rollout → returns → epochs ×
minibatches of optimiser steps → metrics, scanned over updates.

A learner (PPO, A2C, PQN) supplies an ``OnPolicyLearner``: how it acts, what
it learns on, its loss and its optimiser. ``on_policy_trainer`` builds the
whole ``Trainer`` around them.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.metrics import episode_metrics
from ondevice_rl.normalize import normalize_obs, normalize_rollout
from ondevice_rl.rollout import Transition, rollout
from ondevice_rl.sharding import all_mean
from ondevice_rl.train.kit.env_setup import EnvSetup
from ondevice_rl.train.kit.minibatches import shuffled_minibatches
from ondevice_rl.train.kit.optim import flat_apply, gradient_step
from ondevice_rl.train.kit.protocol import HostLoop, Trainer, feed_forward_trainer
from ondevice_rl.train.kit.schedules import learning_rate_fn
from ondevice_rl.train.kit.state import TrainState, initial_state


class OnPolicyLearner(NamedTuple):
    """What is a learner's own in the on-policy update.

    Attributes:
        network: its flax module.
        act: ``(params, obs [B, ...], key, hp, env_steps) -> (action,
            env_action, extras)``, the rollout's chooser (``extras`` are kept
            in the ``Transition``).
        batch: ``(params, traj [T, B], hp) -> batch``, what the loss learns
            on (returns, advantages ...), leaves ``[T, B, ...]``.
        loss: ``(apply_fn, flat_params, batch, hp) -> (loss, stats)``,
            ``stats`` a NamedTuple of scalars.
        optimizer: ``(hp, learning_rate) -> optax.GradientTransformation``
            with ``learning_rate`` a ``count -> lr`` schedule.
        policy: the trained policy (``train/kit/policies.py``).
        metrics: ``(hp, env_steps) -> dict`` of extra per-update metrics.
    """

    network: Any
    act: Callable
    batch: Callable
    loss: Callable
    optimizer: Callable
    policy: Callable
    metrics: Callable = lambda hp, env_steps: {}
    #: One optimiser step on the whole ``[T, B]`` batch as it is (A2C), not
    #: epochs × shuffled minibatches.
    whole_batch: bool = False


def on_policy_trainer(
    config: Any,
    setup: EnvSetup,
    learner: OnPolicyLearner,
    axis_name: str | None = None,
    num_devices: int = 1,
) -> Trainer:
    """The ``Trainer`` of an on-policy learner.

    ``config`` has ``num_envs``, ``num_steps``, ``update_epochs``,
    ``num_minibatches``, ``num_updates`` and ``lr_schedule``.
    With ``axis_name`` set, ``learn`` and ``run`` are the per-device bodies
    of a data-parallel run inside ``jax.shard_map`` over ``num_devices``
    devices: each holds ``num_envs / num_devices`` environments, gradients
    and statistics are averaged over the axis. ``init`` builds the global
    state.
    """
    env, network = setup.env, learner.network
    epochs, minibatches = config.update_epochs, config.num_minibatches
    local_batch = config.batch_size // num_devices

    def optimizer(hp):
        lr = learning_rate_fn(
            config.lr_schedule,
            hp.learning_rate,
            config.num_updates,
            epochs * minibatches,
        )
        return learner.optimizer(hp, lr)

    def init(key, hp, env_params=None) -> TrainState:
        return initial_state(
            key, env_params, setup, network, config, optimizer(hp).init
        )

    def learn(params, opt_state, traj: Transition, key, hp):
        """The learner's batch from one ``[T, B]`` rollout, then epochs ×
        minibatches of optimiser steps; ``(params, opt_state, stats)`` with
        the stats averaged over all steps (and devices)."""
        batch = learner.batch(params, traj, hp)
        tx = optimizer(hp)
        flat, unravel, apply_fn = flat_apply(network, params)

        def step(carry, minibatch):
            flat, opt_state = carry
            flat, opt_state, stats = gradient_step(
                tx, learner.loss, apply_fn, flat, opt_state, minibatch, hp,
                axis_name=axis_name,
            )  # fmt: skip
            return (flat, opt_state), stats

        if learner.whole_batch:
            (flat, opt_state), stats = step((flat, opt_state), batch)
        else:
            samples = jax.tree.map(
                lambda x: x.reshape((local_batch,) + x.shape[2:]), batch
            )

            def epoch(carry, epoch_key):
                shuffled = shuffled_minibatches(epoch_key, samples, minibatches)
                return jax.lax.scan(step, carry, shuffled)

            keys = jax.random.split(key, epochs)
            (flat, opt_state), stats = jax.lax.scan(epoch, (flat, opt_state), keys)
            stats = jax.tree.map(jnp.mean, stats)
        if axis_name is not None:
            stats = all_mean(stats, axis_name)
        return unravel(flat), opt_state, stats

    def update(state: TrainState, hp, env_params=None):
        env_params = setup.default_params if env_params is None else env_params
        norm = state.normalizer
        env_steps = state.update_step * config.steps_per_update

        def act(params, obs, key):
            return learner.act(params, normalize_obs(norm, obs), key, hp, env_steps)

        rollout_state, traj, episodes = rollout(
            env, env_params, act, state.params, state.rollout, config.num_steps
        )
        norm, traj = normalize_rollout(norm, traj, hp.gamma)
        key, learn_key = jax.random.split(rollout_state.key)
        params, opt_state, stats = learn(
            state.params, state.opt_state, traj, learn_key, hp
        )
        tracker, metrics = episode_metrics(
            episodes, rollout_state.env_state, state.episodes, axis_name
        )
        new_state = TrainState(
            params,
            opt_state,
            rollout_state._replace(key=key),
            state.update_step + 1,
            tracker,
            norm,
        )
        extra = learner.metrics(hp, env_steps)
        return new_state, {**metrics, **stats._asdict(), **extra}

    def host_act(params, obs, key):
        return learner.act(params, obs, key, None, 0)

    return feed_forward_trainer(
        config, setup, network, init, update, learner.policy, HostLoop(host_act, learn)
    )
