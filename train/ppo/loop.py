"""PPO fused into one program: rollout → GAE → epochs × minibatches, scanned.

``make_train(config)`` returns ``train(key, hyperparams, env_params=None)``, a
pure function safe to ``jax.jit`` and ``jax.vmap``. ``make_trainer(config)``
exposes the same program in pieces (``init``, ``update``, ``run``) so a host
loop can run it as a few compiled segments with the state left on device.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.flatten_util import ravel_pytree

from ondevice_rl.metrics import EPISODE_METRICS, EpisodeTracker, episode_metrics
from ondevice_rl.networks import ActorCritic, log_prob, sample_action
from ondevice_rl.normalize import (
    Normalizer,
    init_normalizer,
    normalize_obs,
    normalize_rollout,
)
from ondevice_rl.returns import gae
from ondevice_rl.rollout import RolloutState, Transition, batch_reset, rollout
from ondevice_rl.sharding import all_mean
from ondevice_rl.train.kit.algorithm import TrainOutput, scan_updates, whole_run
from ondevice_rl.train.kit.env_setup import make_env
from ondevice_rl.train.kit.minibatches import shuffled_minibatches
from ondevice_rl.train.ppo.config import Hyperparams, PPOConfig
from ondevice_rl.train.ppo.loss import LossStats, Minibatch, ppo_loss


class ActorExtras(NamedTuple):
    """What PPO keeps of each rollout step beside the transition, ``[B]``."""

    log_prob: jax.Array
    value: jax.Array


class TrainState(NamedTuple):
    """Everything the loop carries; arrays only."""

    params: Any
    opt_state: Any
    rollout: RolloutState
    update_step: jax.Array  # [] int32, updates done so far
    episodes: EpisodeTracker
    #: Running obs/reward statistics (``normalize_obs``/``normalize_rewards``);
    #: ``Normalizer((), ())``, no leaves, when both are off.
    normalizer: Normalizer = Normalizer((), ())


class Trainer(NamedTuple):
    """The fused program in pieces. All functions are pure.

    ``init(key, hp, env_params) -> TrainState``;
    ``init_opt_state(params, hp)`` -> the optimiser state ``learn`` expects;
    ``act(params, obs, key) -> (action, env_action, ActorExtras)`` samples
    from the policy (the rollout's chooser);
    ``learn(params, opt_state, traj, key, hp) -> (params, opt_state, stats)``
    runs GAE and the epochs × minibatches on one ``[T, B]`` rollout (also used
    by the host-loop baseline in ``train/bench``);
    ``update(state, hp, env_params) -> (state, metrics)`` is a rollout then
    ``learn``; ``run(state, hp, env_params, num_updates)`` scans
    ``update`` (``num_updates`` is static).
    """

    config: PPOConfig
    env: Any
    default_env_params: Any
    network: ActorCritic
    optimizer: Callable  # hp -> optax.GradientTransformation
    act: Callable
    init: Callable
    init_opt_state: Callable
    learn: Callable
    update: Callable
    run: Callable


METRIC_NAMES = EPISODE_METRICS + LossStats._fields


def make_trainer(
    config: PPOConfig, axis_name: str | None = None, num_devices: int = 1
) -> Trainer:
    """Builds the program's pieces.

    With ``axis_name`` set, ``learn``/``update``/``run`` are the per-device
    bodies of a data-parallel run inside ``jax.shard_map`` over ``num_devices``
    devices (see ``train/ppo_dp.py``): each device holds ``num_envs /
    num_devices`` environments, gradients and statistics are averaged over the
    axis, and params stay replicated. ``init`` always builds the global state.
    """
    local_batch = config.batch_size // num_devices
    if axis_name is not None and (config.normalize_obs or config.normalize_rewards):
        raise ValueError("data-parallel PPO does not normalise obs or rewards")
    setup = make_env(config.env)
    env, default_env_params = setup.env, setup.default_params
    network = ActorCritic(
        setup.action_dim,
        setup.continuous,
        config.hidden,
        config.activation,
        obs_ndim=len(setup.obs_shape),  # MLP for vectors, CNN for images
    )

    def act(params, obs, key):
        pi = network.apply(params, obs)
        action = sample_action(key, pi)
        extras = ActorExtras(log_prob(pi, action), pi.value)
        return action, setup.to_env_action(action), extras

    updates_per_opt_step = config.update_epochs * config.num_minibatches

    def optimizer(hp: Hyperparams) -> optax.GradientTransformation:
        def learning_rate(count):
            if not config.anneal_lr:
                return hp.learning_rate
            done = (count // updates_per_opt_step).astype(jnp.float32)
            return hp.learning_rate * (1.0 - done / config.num_updates)

        return optax.chain(
            optax.clip_by_global_norm(hp.max_grad_norm),
            optax.adam(learning_rate, eps=1e-5),
        )

    def init_opt_state(params, hp: Hyperparams):
        """Optimiser state over the flat parameter vector ``learn`` steps on."""
        return optimizer(hp).init(ravel_pytree(params)[0])

    def init(key, hp: Hyperparams, env_params=None) -> TrainState:
        env_params = default_env_params if env_params is None else env_params
        net_key, env_key, key = jax.random.split(key, 3)
        params = network.init(net_key, jnp.zeros(setup.obs_shape, jnp.float32))
        rollout_state = batch_reset(env, env_params, env_key, config.num_envs)
        rollout_state = rollout_state._replace(key=key)
        opt_state = init_opt_state(params, hp)
        normalizer = init_normalizer(
            setup.obs_shape,
            config.num_envs,
            config.normalize_obs,
            config.normalize_rewards,
        )
        return TrainState(
            params,
            opt_state,
            rollout_state,
            jnp.int32(0),
            EpisodeTracker.create(),
            normalizer,
        )

    def learn(params, opt_state, traj: Transition, key, hp: Hyperparams):
        """GAE, then epochs × minibatches of optimiser steps on ``[T, B]`` data.

        Uses every field of ``traj`` (``extras`` are ``ActorExtras``).
        Returns ``(params, opt_state, LossStats)`` with the stats averaged
        over all minibatch steps.

        The optimiser steps on the parameters raveled into one vector (the
        network unravels it, which costs a few slices): clipping and Adam
        then run as a handful of kernels instead of several per leaf, ~12%
        of a minibatch step on CPU.
        """

        def apply_fn(flat_params, obs):
            return network.apply(unravel(flat_params), obs)

        next_values = network.apply(params, traj.final_obs, method=ActorCritic.value)
        adv, targets = gae(
            traj.reward,
            traj.extras.value,
            next_values,
            traj.terminated,
            traj.truncated,
            hp.gamma,
            hp.gae_lambda,
        )
        tx = optimizer(hp)
        params, unravel = ravel_pytree(params)
        extras = traj.extras
        flat = Minibatch(
            traj.obs, traj.action, extras.log_prob, extras.value, adv, targets
        )
        flat = jax.tree.map(lambda x: x.reshape((local_batch,) + x.shape[2:]), flat)

        def minibatch_step(carry, batch: Minibatch):
            params, opt_state = carry
            grad_params = params
            if axis_name is not None:
                # Replicated params would make jax.grad sum over devices; as
                # device-varying values each device gets its own gradient.
                grad_params = jax.lax.pcast(params, axis_name, to="varying")
            grads, stats = jax.grad(ppo_loss, argnums=1, has_aux=True)(
                apply_fn, grad_params, batch, hp
            )
            if axis_name is not None:
                grads = all_mean(grads, axis_name)
            updates, opt_state = tx.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), stats

        def epoch(carry, epoch_key):
            shuffled = shuffled_minibatches(epoch_key, flat, config.num_minibatches)
            return jax.lax.scan(minibatch_step, carry, shuffled)

        keys = jax.random.split(key, config.update_epochs)
        (params, opt_state), stats = jax.lax.scan(epoch, (params, opt_state), keys)
        stats = mean_over_devices(jax.tree.map(jnp.mean, stats))
        return unravel(params), opt_state, stats

    def mean_over_devices(tree):
        return tree if axis_name is None else all_mean(tree, axis_name)

    def update(state: TrainState, hp: Hyperparams, env_params=None):
        env_params = default_env_params if env_params is None else env_params
        norm = state.normalizer

        def act_normalized(params, obs, key):
            return act(params, normalize_obs(norm, obs), key)

        rollout_state, traj, episodes = rollout(
            env,
            env_params,
            act_normalized,
            state.params,
            state.rollout,
            config.num_steps,
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
        return new_state, {**metrics, **stats._asdict()}

    run = scan_updates(update)

    return Trainer(
        config,
        env,
        default_env_params,
        network,
        optimizer,
        act,
        init,
        init_opt_state,
        learn,
        update,
        run,
    )


def make_train(config: PPOConfig) -> Callable[..., TrainOutput]:
    """``train(key, hyperparams, env_params=None) -> TrainOutput``, pure.

    ``TrainOutput.metrics[name]`` has shape ``[num_updates]`` (with leading
    population axes under ``vmap``).
    """
    return whole_run(make_trainer(config))
