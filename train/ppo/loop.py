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

from ondevice_rl import envs
from ondevice_rl.gae import gae
from ondevice_rl.networks import ActorCritic
from ondevice_rl.rollout import RolloutState, Transition, batch_reset, rollout
from ondevice_rl.sharding import all_masked_mean, all_mean
from ondevice_rl.spaces import Box
from ondevice_rl.train.ppo.config import Hyperparams, PPOConfig
from ondevice_rl.train.ppo.loss import LossStats, Minibatch, ppo_loss
from ondevice_rl.train.ppo.minibatches import shuffled_minibatches
from ondevice_rl.wrappers import AutoReset, EpisodeStats


class TrainState(NamedTuple):
    """Everything the loop carries; arrays only."""

    params: Any
    opt_state: Any
    rollout: RolloutState
    update_step: jax.Array  # [] int32, updates done so far
    last_return: jax.Array  # [] mean return of the latest finished episodes
    last_length: jax.Array  # [] their mean length


class TrainOutput(NamedTuple):
    state: TrainState
    metrics: dict  # name -> [num_updates] float32


class Trainer(NamedTuple):
    """The fused program in pieces. All functions are pure.

    ``init(key, hp, env_params) -> TrainState``;
    ``init_opt_state(params, hp)`` -> the optimiser state ``learn`` expects;
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
    init: Callable
    init_opt_state: Callable
    learn: Callable
    update: Callable
    run: Callable


METRIC_NAMES = ("episode_return", "episode_length", "episodes") + LossStats._fields


def _masked_mean(x: jax.Array, mask: jax.Array, fallback: jax.Array) -> jax.Array:
    count = mask.sum()
    mean = jnp.where(mask, x, 0.0).sum() / jnp.maximum(count, 1)
    return jnp.where(count > 0, mean, fallback).astype(jnp.float32)


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
    env, default_env_params = envs.make(config.env)
    action_space = env.action_space(default_env_params)
    continuous = isinstance(action_space, Box)
    action_dim = action_space.shape[0] if continuous else action_space.n
    obs_shape = env.observation_space(default_env_params).shape
    env = EpisodeStats(AutoReset(env))
    network = ActorCritic(action_dim, continuous, config.hidden, config.activation)
    if continuous:
        low, high = action_space.low, action_space.high

        def to_env_action(action):
            return jnp.clip(action, low, high)
    else:

        def to_env_action(action):
            return action

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
        params = network.init(net_key, jnp.zeros(obs_shape, jnp.float32))
        rollout_state = batch_reset(env, env_params, env_key, config.num_envs)
        rollout_state = rollout_state._replace(key=key)
        # NaN means "no episode finished yet"; metrics never report it (below).
        nan = jnp.float32(jnp.nan)
        opt_state = init_opt_state(params, hp)
        return TrainState(params, opt_state, rollout_state, jnp.int32(0), nan, nan)

    def learn(params, opt_state, traj: Transition, key, hp: Hyperparams):
        """GAE, then epochs × minibatches of optimiser steps on ``[T, B]`` data.

        Uses ``traj``'s obs, action, log_prob, value, reward, terminated,
        truncated and final_obs. Returns ``(params, opt_state, LossStats)``
        with the stats averaged over all minibatch steps.

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
            traj.value,
            next_values,
            traj.terminated,
            traj.truncated,
            hp.gamma,
            hp.gae_lambda,
        )
        tx = optimizer(hp)
        params, unravel = ravel_pytree(params)
        flat = Minibatch(traj.obs, traj.action, traj.log_prob, traj.value, adv, targets)
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

    def masked_mean(x, mask, fallback):
        if axis_name is None:
            return _masked_mean(x, mask, fallback)
        return all_masked_mean(x, mask, fallback, axis_name)

    def update(state: TrainState, hp: Hyperparams, env_params=None):
        env_params = default_env_params if env_params is None else env_params
        rollout_state, traj = rollout(
            env,
            env_params,
            network.apply,
            state.params,
            state.rollout,
            config.num_steps,
            to_env_action,
        )
        key, learn_key = jax.random.split(rollout_state.key)
        params, opt_state, stats = learn(
            state.params, state.opt_state, traj, learn_key, hp
        )
        done = traj.episode_done
        last_return = masked_mean(traj.episode_return, done, state.last_return)
        last_length = masked_mean(traj.episode_length, done, state.last_length)
        # Until a first episode ends, report the episodes in progress instead.
        running = rollout_state.env_state
        running_return, running_length = mean_over_devices(
            (
                running.episode_return.mean(),
                running.episode_length.mean().astype(jnp.float32),
            )
        )
        episodes = done.sum().astype(jnp.float32)
        metrics = {
            "episode_return": jnp.where(
                jnp.isnan(last_return), running_return, last_return
            ),
            "episode_length": jnp.where(
                jnp.isnan(last_length), running_length, last_length
            ),
            "episodes": (
                episodes if axis_name is None else jax.lax.psum(episodes, axis_name)
            ),
            **stats._asdict(),
        }
        new_state = TrainState(
            params,
            opt_state,
            rollout_state._replace(key=key),
            state.update_step + 1,
            last_return,
            last_length,
        )
        return new_state, metrics

    def run(state: TrainState, hp: Hyperparams, env_params=None, num_updates=1):
        def body(state, _):
            return update(state, hp, env_params)

        return jax.lax.scan(body, state, None, length=num_updates)

    return Trainer(
        config,
        env,
        default_env_params,
        network,
        optimizer,
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
    trainer = make_trainer(config)

    def train(key, hyperparams: Hyperparams, env_params=None) -> TrainOutput:
        state = trainer.init(key, hyperparams, env_params)
        state, metrics = trainer.run(state, hyperparams, env_params, config.num_updates)
        return TrainOutput(state, metrics)

    return train
