"""PQN fused into one program: ε-greedy rollout → Q(λ) returns → epochs ×
minibatches of TD regression, scanned. No replay buffer, no target network.

``make_train(config)`` returns ``train(key, hyperparams, env_params=None)``,
pure, safe to ``jax.jit`` and ``jax.vmap``; the update's scaffold is the
learner kit's (``train/kit/on_policy.py``).
"""

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from ondevice_rl.returns import lambda_returns
from ondevice_rl.rollout import Transition
from ondevice_rl.train.kit.agent import build_agent
from ondevice_rl.train.kit.env_setup import make_env, require_discrete
from ondevice_rl.train.kit.exploration import epsilon_greedy, linear_epsilon
from ondevice_rl.train.kit.on_policy import OnPolicyLearner, on_policy_trainer
from ondevice_rl.train.kit.policies import q_policy
from ondevice_rl.train.kit.protocol import Trainer, TrainOutput, whole_run
from ondevice_rl.train.pqn.config import Hyperparams, PQNConfig


class Minibatch(NamedTuple):
    """One gradient step's samples, leaves ``[M, ...]``."""

    obs: jax.Array  # [M, *obs_shape]
    action: jax.Array  # [M] int32
    target: jax.Array  # [M] Q(λ) return


class LearnStats(NamedTuple):
    """Means over one update's minibatch steps."""

    td_loss: jax.Array  # ½·(Q(s, a) − target)²
    q_mean: jax.Array  # Q(s, a) of the taken actions


def td_loss(apply_fn, params, batch: Minibatch, hp: Hyperparams):
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
    agent = build_agent(setup, config, "q", layer_norm=config.layer_norm)

    def epsilon(hp: Hyperparams, env_steps) -> jax.Array:
        return linear_epsilon(
            env_steps, config.exploration_steps, hp.eps_start, hp.eps_end
        )

    def act(q, key, hp, env_steps, mask):
        action = epsilon_greedy(key, q, epsilon(hp, env_steps), mask)
        return action, action, ()

    def batch(traj: Transition, q, final_q, hp: Hyperparams) -> Minibatch:
        """Q(λ) targets bootstrapping from ``max_a Q(final_obs, a)`` of the
        network that collected ``traj`` (truncation bootstraps, termination
        does not); fixed over the epochs."""
        next_q = jnp.max(final_q, axis=-1)  # [T, B]
        targets = lambda_returns(
            traj.reward,
            next_q,
            traj.terminated,
            traj.truncated,
            hp.gamma,
            hp.q_lambda,
        )
        return Minibatch(traj.obs, traj.action, jax.lax.stop_gradient(targets))

    def optimizer(hp: Hyperparams, learning_rate) -> optax.GradientTransformation:
        return optax.chain(
            optax.clip_by_global_norm(hp.max_grad_norm), optax.radam(learning_rate)
        )

    def metrics(hp: Hyperparams, env_steps) -> dict:
        return {"epsilon": epsilon(hp, env_steps)}

    policy = q_policy(agent, config.eps_end)
    learner = OnPolicyLearner(agent, act, batch, td_loss, optimizer, policy, metrics)
    return on_policy_trainer(config, setup, learner)


def make_train(config: PQNConfig) -> Callable[..., TrainOutput]:
    """``train(key, hyperparams, env_params=None) -> TrainOutput``, pure;
    ``metrics[name]`` is ``[num_updates]`` (leading population axes under
    ``vmap``)."""
    return whole_run(make_trainer(config))
