"""DQN fused into one program, its replay buffer in device memory.

Each update: ``train_frequency`` ε-greedy vector steps through the generic
rollout, appended to the buffer; once ``learning_starts`` env steps have been
taken, ``gradient_steps`` gradient steps on sampled batches; then a target
update whenever the env-step count crosses a multiple of
``target_update_every``. The buffer is part of ``TrainState``, so it is
scanned, vmapped over seeds, sharded and checkpointed with the rest.

``make_train(config)`` returns ``train(key, hyperparams, env_params=None)``, a
pure function safe to ``jax.jit`` and ``jax.vmap``. ``make_trainer(config)``
exposes it in pieces (``init``, ``update``, ``run``) for segmented runs.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.flatten_util import ravel_pytree

from ondevice_rl.metrics import EPISODE_METRICS, EpisodeTracker, episode_metrics
from ondevice_rl.networks import QNetwork
from ondevice_rl.replay import ReplayBuffer
from ondevice_rl.rollout import RolloutState, Transition, batch_reset, rollout
from ondevice_rl.train.dqn.config import DQNConfig, Hyperparams
from ondevice_rl.train.dqn.loss import LossStats, bootstrap_values, td_loss, td_targets
from ondevice_rl.train.kit.algorithm import TrainOutput, scan_updates, whole_run
from ondevice_rl.train.kit.env_setup import make_env, require_discrete
from ondevice_rl.train.kit.exploration import epsilon_greedy


class TrainState(NamedTuple):
    """Everything the loop carries; arrays only."""

    params: Any  # online Q-network
    target_params: Any
    opt_state: Any  # over the raveled online parameters
    buffer: ReplayBuffer  # data: Transition, leaves [C, B, ...], extras ()
    rollout: RolloutState
    update_step: jax.Array  # [] int32, updates done (env steps = × steps_per_update)
    episodes: EpisodeTracker


class Trainer(NamedTuple):
    """The fused program in pieces. All functions are pure.

    ``epsilon(env_steps, hp) -> []`` the ε-greedy schedule;
    ``act((params, epsilon), obs [B, ...], key) -> (action [B], action, ())``
    is the rollout's chooser (ε-greedy on ``network``'s Q-values);
    ``init(key, hp, env_params) -> TrainState`` (empty buffer);
    ``learn(params, target_params, opt_state, buffer, key, hp) -> (params,
    opt_state, LossStats)`` runs ``gradient_steps`` gradient steps (stats
    averaged over them);
    ``update(state, hp, env_params) -> (state, metrics)`` is one update;
    ``run(state, hp, env_params, num_updates)`` scans ``update``
    (``num_updates`` is static).
    """

    config: DQNConfig
    env: Any
    default_env_params: Any
    network: QNetwork
    optimizer: Callable  # hp -> optax.GradientTransformation
    epsilon: Callable
    act: Callable
    init: Callable
    init_opt_state: Callable
    learn: Callable
    update: Callable
    run: Callable


METRIC_NAMES = EPISODE_METRICS + LossStats._fields + ("epsilon",)


def make_trainer(config: DQNConfig) -> Trainer:
    """Builds the program's pieces.

    Raises:
        KeyError: unknown env (naming close matches).
        ValueError: the env's action space is continuous.
    """
    setup = require_discrete(make_env(config.env), "dqn", config.env)
    env, default_env_params = setup.env, setup.default_params
    num_actions = setup.action_dim
    network = QNetwork(
        num_actions, config.hidden, config.activation, obs_ndim=len(setup.obs_shape)
    )
    steps_per_update = config.steps_per_update

    def epsilon(env_steps, hp: Hyperparams) -> jax.Array:
        """ε after ``env_steps`` env steps: linear from ``eps_start`` to
        ``eps_end`` over ``exploration_steps``, then constant."""
        frac = jnp.minimum(env_steps / config.exploration_steps, 1.0)
        return (hp.eps_start + frac * (hp.eps_end - hp.eps_start)).astype(jnp.float32)

    def act(actor, obs, key):
        params, eps = actor
        action = epsilon_greedy(key, network.apply(params, obs), eps)
        return action, action, ()

    def optimizer(hp: Hyperparams) -> optax.GradientTransformation:
        return optax.chain(
            optax.clip_by_global_norm(hp.max_grad_norm),
            optax.adam(hp.learning_rate),
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
        obs = jnp.zeros((config.num_envs,) + setup.obs_shape, jnp.float32)
        flags = jnp.zeros((config.num_envs,), jnp.bool_)
        example = Transition(
            obs=obs,
            action=jnp.zeros((config.num_envs,), jnp.int32),
            reward=jnp.zeros((config.num_envs,), jnp.float32),
            terminated=flags,
            truncated=flags,
            final_obs=obs,
            extras=(),
        )
        return TrainState(
            params=params,
            target_params=params,
            opt_state=init_opt_state(params, hp),
            buffer=ReplayBuffer.create(example, config.buffer_capacity),
            rollout=rollout_state,
            update_step=jnp.int32(0),
            episodes=EpisodeTracker.create(),
        )

    def learn(params, target_params, opt_state, buffer: ReplayBuffer, key, hp):
        """``gradient_steps`` steps, each on ``batch_size`` sampled sequences
        of ``n_step`` steps (``[n_step, batch_size]``); returns ``(params,
        opt_state, LossStats)``.

        The optimiser steps on the raveled parameter vector, as PPO's does:
        clipping and Adam then run as a few kernels instead of several per
        leaf.
        """
        tx = optimizer(hp)
        flat_params, unravel = ravel_pytree(params)

        def apply_fn(flat, obs):
            return network.apply(unravel(flat), obs)

        def step(carry, step_key):
            flat, opt_state = carry
            seq = buffer.sample(step_key, config.batch_size, config.n_step)
            q_next = network.apply(target_params, seq.final_obs)  # [n, M, A]
            q_online_next = apply_fn(flat, seq.final_obs) if config.double_dqn else None
            next_values = bootstrap_values(q_next, q_online_next)
            targets = td_targets(seq, next_values, hp.gamma, config.n_step)
            grads, stats = jax.grad(td_loss, argnums=1, has_aux=True)(
                apply_fn, flat, seq.obs[0], seq.action[0], targets, config.loss
            )
            updates, opt_state = tx.update(grads, opt_state, flat)
            return (optax.apply_updates(flat, updates), opt_state), stats

        if config.gradient_steps == 1:
            keys = key[None]
        else:
            keys = jax.random.split(key, config.gradient_steps)
        (flat_params, opt_state), stats = jax.lax.scan(
            step, (flat_params, opt_state), keys
        )
        return unravel(flat_params), opt_state, jax.tree.map(jnp.mean, stats)

    def update(state: TrainState, hp: Hyperparams, env_params=None):
        env_params = default_env_params if env_params is None else env_params
        env_steps = state.update_step * steps_per_update
        eps = epsilon(env_steps, hp)
        rollout_state, traj, episodes = rollout(
            env,
            env_params,
            act,
            (state.params, eps),
            state.rollout,
            config.train_frequency,
        )
        buffer = state.buffer.add(traj)
        key, learn_key = jax.random.split(rollout_state.key)
        done_steps = env_steps + steps_per_update
        ready = (done_steps >= config.learning_starts) & buffer.can_sample(
            config.n_step
        )
        # Under vmap (seeds, populations) the cond becomes a select: both run.
        params, opt_state, stats = jax.lax.cond(
            ready,
            lambda: learn(
                state.params,
                state.target_params,
                state.opt_state,
                buffer,
                learn_key,
                hp,
            ),
            lambda: (
                state.params,
                state.opt_state,
                LossStats(jnp.float32(0.0), jnp.float32(0.0)),
            ),
        )
        every = config.target_update_every
        target_params = jax.lax.cond(
            done_steps // every > env_steps // every,
            lambda: jax.tree.map(
                lambda new, old: hp.tau * new + (1.0 - hp.tau) * old,
                params,
                state.target_params,
            ),
            lambda: state.target_params,
        )
        tracker, metrics = episode_metrics(
            episodes, rollout_state.env_state, state.episodes
        )
        new_state = TrainState(
            params=params,
            target_params=target_params,
            opt_state=opt_state,
            buffer=buffer,
            rollout=rollout_state._replace(key=key),
            update_step=state.update_step + 1,
            episodes=tracker,
        )
        return new_state, {**metrics, **stats._asdict(), "epsilon": eps}

    run = scan_updates(update)

    return Trainer(
        config,
        env,
        default_env_params,
        network,
        optimizer,
        epsilon,
        act,
        init,
        init_opt_state,
        learn,
        update,
        run,
    )


def make_train(config: DQNConfig) -> Callable[..., TrainOutput]:
    """``train(key, hyperparams, env_params=None) -> TrainOutput``, pure.

    ``TrainOutput.metrics[name]`` has shape ``[num_updates]`` (with leading
    population axes under ``vmap``); names are ``METRIC_NAMES``.
    """
    return whole_run(make_trainer(config))
