"""A2C fused into one program: rollout → returns → one gradient step, scanned.

Synchronous advantage actor-critic as in PAAC (Clemente et al., 2017): ``B``
environments step together for ``T`` steps, then one optimiser step on the
whole ``[T, B]`` batch. ``make_train(config)`` returns ``train(key,
hyperparams, env_params=None)``, a pure function safe to ``jax.jit`` and
``jax.vmap``; ``make_trainer(config)`` exposes the same program in pieces
(``init``, ``update``, ``run``) so a host loop can run it as a few compiled
segments with the state left on device.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.flatten_util import ravel_pytree

from ondevice_rl.metrics import EPISODE_METRICS, EpisodeTracker, episode_metrics
from ondevice_rl.networks import ActorCritic, sample_action
from ondevice_rl.normalize import (
    Normalizer,
    init_normalizer,
    normalize_obs,
    normalize_rollout,
)
from ondevice_rl.returns import gae, n_step_returns
from ondevice_rl.rollout import RolloutState, Transition, batch_reset, rollout
from ondevice_rl.train.a2c.config import A2CConfig, Hyperparams
from ondevice_rl.train.a2c.loss import Batch, LossStats, a2c_loss
from ondevice_rl.train.kit.algorithm import TrainOutput, scan_updates, whole_run
from ondevice_rl.train.kit.env_setup import make_env


class ActorExtras(NamedTuple):
    """What A2C keeps of each rollout step beside the transition, ``[B]``."""

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
    computes the returns of one ``[T, B]`` rollout and takes one optimiser
    step (``key`` is unused: kept so ``learn`` has PPO's signature);
    ``update(state, hp, env_params) -> (state, metrics)`` is a rollout then
    ``learn``; ``run(state, hp, env_params, num_updates)`` scans ``update``
    (``num_updates`` is static).
    """

    config: A2CConfig
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

#: Standardise the advantages over the ``[T, B]`` batch before the policy
#: gradient (PAAC and the baselines do not). Measured with 8 seeds at 1e6 env
#: steps (GAE, RMSprop 7e-4, 16 envs × 5 steps): CartPole-v1 reaches 500 on
#: every seed instead of a mean of 485, Acrobot-v1 a mean of -82 instead of
#: -93 (one seed at -161). It also makes the policy step independent of the
#: rewards' scale.
NORMALIZE_ADVANTAGES = True


def make_trainer(config: A2CConfig) -> Trainer:
    """Builds the program's pieces."""
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
        return action, setup.to_env_action(action), ActorExtras(pi.value)

    def optimizer(hp: Hyperparams) -> optax.GradientTransformation:
        def learning_rate(count):
            # One optimiser step per update, so ``count`` counts updates.
            if not config.anneal_lr:
                return hp.learning_rate
            done = count.astype(jnp.float32)
            return hp.learning_rate * (1.0 - done / config.num_updates)

        if config.optimizer == "rmsprop":
            step = optax.rmsprop(
                learning_rate, decay=hp.rmsprop_decay, eps=hp.optimizer_eps
            )
        else:
            step = optax.adam(learning_rate, eps=hp.optimizer_eps)
        return optax.chain(optax.clip_by_global_norm(hp.max_grad_norm), step)

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
        """Returns, then one optimiser step on the whole ``[T, B]`` rollout.

        ``traj.extras.value`` ``[T, B]`` are the critic's values at collection
        time, which are the current params' (one step per rollout). Each
        step bootstraps from ``V(final_obs)`` where an episode was truncated
        and at the rollout's end. Returns ``(params, opt_state, LossStats)``.

        As in PPO, the optimiser steps on the parameters raveled into one
        vector, so clipping and the optimiser run as a few kernels.
        """
        del key
        values = traj.extras.value
        next_values = network.apply(params, traj.final_obs, method=ActorCritic.value)
        ends = (traj.terminated, traj.truncated)
        if config.use_gae:
            adv, targets = gae(
                traj.reward, values, next_values, *ends, hp.gamma, hp.gae_lambda
            )
        else:
            targets = n_step_returns(traj.reward, next_values, *ends, hp.gamma, n=None)
            adv = targets - values
        batch = Batch(traj.obs, traj.action, adv, targets)

        flat_params, unravel = ravel_pytree(params)

        def apply_fn(flat, obs):
            return network.apply(unravel(flat), obs)

        grads, stats = jax.grad(a2c_loss, argnums=1, has_aux=True)(
            apply_fn, flat_params, batch, hp, NORMALIZE_ADVANTAGES
        )
        updates, opt_state = optimizer(hp).update(grads, opt_state, flat_params)
        flat_params = optax.apply_updates(flat_params, updates)
        return unravel(flat_params), opt_state, stats

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
            episodes, rollout_state.env_state, state.episodes
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


def make_train(config: A2CConfig) -> Callable[..., TrainOutput]:
    """``train(key, hyperparams, env_params=None) -> TrainOutput``, pure.

    ``TrainOutput.metrics[name]`` has shape ``[num_updates]`` (with leading
    population axes under ``vmap``).
    """
    return whole_run(make_trainer(config))
