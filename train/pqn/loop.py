"""PQN fused into one program: ε-greedy rollout → Q(λ) returns → epochs ×
minibatches of TD regression, scanned. No replay buffer, no target network.

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
from ondevice_rl.networks import QNetwork
from ondevice_rl.returns import lambda_returns
from ondevice_rl.rollout import RolloutState, Transition, batch_reset, rollout
from ondevice_rl.train.kit.algorithm import TrainOutput, scan_updates, whole_run
from ondevice_rl.train.kit.env_setup import make_env, require_discrete
from ondevice_rl.train.kit.exploration import epsilon_greedy
from ondevice_rl.train.kit.minibatches import shuffled_minibatches
from ondevice_rl.train.pqn.config import Hyperparams, PQNConfig


class TrainState(NamedTuple):
    """Everything the loop carries; arrays only."""

    params: Any
    opt_state: Any
    rollout: RolloutState
    update_step: jax.Array  # [] int32, updates done so far
    episodes: EpisodeTracker


class Minibatch(NamedTuple):
    """One gradient step's samples, leaves ``[M, ...]``."""

    obs: jax.Array  # [M, *obs_shape]
    action: jax.Array  # [M] int32
    target: jax.Array  # [M] Q(λ) return


class LearnStats(NamedTuple):
    """Means over one update's minibatch steps."""

    td_loss: jax.Array  # ½·(Q(s, a) − target)²
    q_mean: jax.Array  # Q(s, a) of the taken actions


class Trainer(NamedTuple):
    """The fused program in pieces. All functions are pure.

    ``init(key, hp, env_params) -> TrainState``;
    ``init_opt_state(params, hp)`` -> the optimiser state ``learn`` expects;
    ``epsilon(update_step, hp) -> []`` the exploration rate of an update;
    ``act(params, obs, key, epsilon=0.0) -> (action, action, ())`` is
    ε-greedy on ``Q(obs)`` (greedy by default, the rollout's chooser with
    ``epsilon`` bound);
    ``learn(params, opt_state, traj, key, hp) -> (params, opt_state, stats)``
    computes the Q(λ) targets and runs the epochs × minibatches on one
    ``[T, B]`` rollout;
    ``update(state, hp, env_params) -> (state, metrics)`` is a rollout then
    ``learn``; ``run(state, hp, env_params, num_updates)`` scans ``update``
    (``num_updates`` is static).
    """

    config: PQNConfig
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


METRIC_NAMES = EPISODE_METRICS + LearnStats._fields + ("epsilon",)


def td_loss(apply_fn, params, batch: Minibatch):
    """``½·mean((Q(obs, action) − target)²)`` and ``LearnStats``.

    The taken action's value is picked with a one-hot product, not a gather
    (whose gradient is a scatter, slow on CPU).
    """
    q = apply_fn(params, batch.obs)  # [M, A]
    q_taken = jnp.sum(q * jax.nn.one_hot(batch.action, q.shape[-1]), axis=-1)
    loss = 0.5 * jnp.mean(jnp.square(q_taken - batch.target))
    return loss, LearnStats(loss, jnp.mean(q_taken))


def make_trainer(config: PQNConfig) -> Trainer:
    """Builds the program's pieces (ValueError for a continuous action space)."""
    setup = require_discrete(make_env(config.env), "pqn", config.env)
    env, default_env_params = setup.env, setup.default_params
    num_actions = setup.action_dim
    network = QNetwork(
        num_actions,
        config.hidden,
        config.activation,
        config.layer_norm,
        obs_ndim=len(setup.obs_shape),  # MLP for vectors, CNN for images
    )

    def epsilon(update_step, hp: Hyperparams) -> jax.Array:
        """Linear from ``eps_start`` to ``eps_end`` over ``exploration_updates``."""
        done = jnp.asarray(update_step, jnp.float32) / config.exploration_updates
        frac = jnp.minimum(done, 1.0)
        return hp.eps_start + frac * (hp.eps_end - hp.eps_start)

    def act(params, obs, key, epsilon=0.0):
        """ε-greedy actions ``[B]`` int32 for ``obs`` ``[B, *obs_shape]``."""
        action = epsilon_greedy(key, network.apply(params, obs), epsilon)
        return action, action, ()

    updates_per_opt_step = config.update_epochs * config.num_minibatches

    def optimizer(hp: Hyperparams) -> optax.GradientTransformation:
        def learning_rate(count):
            if not config.anneal_lr:
                return hp.learning_rate
            done = (count // updates_per_opt_step).astype(jnp.float32)
            return hp.learning_rate * (1.0 - done / config.num_updates)

        return optax.chain(
            optax.clip_by_global_norm(hp.max_grad_norm),
            optax.radam(learning_rate),
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
        return TrainState(
            params, opt_state, rollout_state, jnp.int32(0), EpisodeTracker.create()
        )

    def learn(params, opt_state, traj: Transition, key, hp: Hyperparams):
        """Q(λ) targets, then epochs × minibatches of optimiser steps.

        ``traj`` is ``[T, B]``; the targets bootstrap from ``max_a Q(final_obs,
        a)`` of the network that collected it (``lambda_returns``: truncation
        bootstraps, termination does not) and stay fixed over the epochs.
        Returns ``(params, opt_state, LearnStats)`` averaged over all steps.
        The optimiser steps on the raveled parameter vector, as PPO's does.
        """
        next_q = jnp.max(network.apply(params, traj.final_obs), axis=-1)  # [T, B]
        targets = lambda_returns(
            traj.reward,
            next_q,
            traj.terminated,
            traj.truncated,
            hp.gamma,
            hp.q_lambda,
        )
        targets = jax.lax.stop_gradient(targets)
        tx = optimizer(hp)
        params, unravel = ravel_pytree(params)

        def apply_fn(flat_params, obs):
            return network.apply(unravel(flat_params), obs)

        flat = Minibatch(traj.obs, traj.action, targets)
        flat = jax.tree.map(
            lambda x: x.reshape((config.batch_size,) + x.shape[2:]), flat
        )

        def minibatch_step(carry, batch: Minibatch):
            params, opt_state = carry
            grads, stats = jax.grad(td_loss, argnums=1, has_aux=True)(
                apply_fn, params, batch
            )
            updates, opt_state = tx.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), stats

        def epoch(carry, epoch_key):
            shuffled = shuffled_minibatches(epoch_key, flat, config.num_minibatches)
            return jax.lax.scan(minibatch_step, carry, shuffled)

        keys = jax.random.split(key, config.update_epochs)
        (params, opt_state), stats = jax.lax.scan(epoch, (params, opt_state), keys)
        return unravel(params), opt_state, jax.tree.map(jnp.mean, stats)

    def update(state: TrainState, hp: Hyperparams, env_params=None):
        env_params = default_env_params if env_params is None else env_params
        eps = epsilon(state.update_step, hp)

        def explore(params, obs, key):
            return act(params, obs, key, eps)

        rollout_state, traj, episodes = rollout(
            env, env_params, explore, state.params, state.rollout, config.num_steps
        )
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


def make_train(config: PQNConfig) -> Callable[..., TrainOutput]:
    """``train(key, hyperparams, env_params=None) -> TrainOutput``, pure.

    ``TrainOutput.metrics[name]`` has shape ``[num_updates]`` (with leading
    population axes under ``vmap``).
    """
    return whole_run(make_trainer(config))
