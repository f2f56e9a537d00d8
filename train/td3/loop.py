"""TD3 fused into one program, its replay buffer in device memory.

The update (act, store, learn from replay, report) is the kit's
(``train/kit/replay_loop.py``, with what SAC and TD3 share in
``train/kit/off_policy_trainer.py``); here are TD3's actor, its exploration
noise, its target actor and its gradient step with the delayed actor and
target update. ``make_train(config)`` returns ``train(key, hyperparams,
env_params=None)``, pure, safe to ``jax.jit`` and ``jax.vmap``.
"""

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp

from ondevice_rl.nn.continuous_control import DeterministicActor
from ondevice_rl.train.kit.off_policy import Model, critic_loss, first_step
from ondevice_rl.train.kit.off_policy_trainer import (
    OffPolicyLearner,
    off_policy_trainer,
)
from ondevice_rl.train.kit.optim import gradient_step
from ondevice_rl.train.kit.protocol import Trainer, TrainOutput, whole_run
from ondevice_rl.train.kit.targets import polyak
from ondevice_rl.train.td3.config import Hyperparams, TD3Config
from ondevice_rl.train.td3.loss import TD3Stats, actor_loss, smoothed_targets


def make_trainer(config: TD3Config) -> Trainer:
    """Builds the program's pieces (ValueError for a discrete or unbounded
    action space)."""
    return off_policy_trainer(config, "td3", functools.partial(_learner, config))


def _noisy(action, key, scale):
    return jnp.clip(action + scale * jax.random.normal(key, action.shape), -1.0, 1.0)


def _learner(config: TD3Config, action_dim: int, obs_ndim: int) -> OffPolicyLearner:
    actor = DeterministicActor(action_dim, config.hidden, config.activation, obs_ndim)

    def explore(params, obs, key, hp):
        return _noisy(actor.apply(params, obs), key, hp.exploration_noise)

    def act(params, obs, key, deterministic):
        action = actor.apply(params, obs)
        if deterministic:
            return action
        return _noisy(action, key, config.exploration_noise)

    def init_own(params, hp: Hyperparams):
        return params  # the target actor

    def init_opt(tx, actor_flat, critic_flat, target_actor):
        return tx.init(actor_flat), tx.init(critic_flat)

    def learn_step(nets, tx, model: Model, seq, key, hp: Hyperparams):
        obs = first_step(seq.obs)  # [M, ...] leaves (a pytree observation's too)
        actor_opt, critic_opt = model.opt_state
        targets = smoothed_targets(nets, model, seq, key, hp, config.n_step)
        critic, critic_opt, critic_stats = gradient_step(
            tx, critic_loss, nets.critic, model.critic, critic_opt,
            obs, seq.action[0], targets,
        )  # fmt: skip
        critics = functools.partial(nets.critic, critic)

        def delayed():
            actor_flat, opt, loss = gradient_step(
                tx, actor_loss, nets.actor, model.actor, actor_opt, critics, obs
            )
            targets = (
                polyak(actor_flat, model.own, hp.tau),
                polyak(critic, model.target_critic, hp.tau),
            )
            return actor_flat, opt, targets, loss

        def not_yet():
            loss, _ = actor_loss(nets.actor, model.actor, critics, obs)
            targets = (model.own, model.target_critic)
            return model.actor, actor_opt, targets, loss

        # A conditional while every seed is at the same step (a select under
        # vmap otherwise); kept one off CPU too: a select would run the actor's
        # step every time and drop half of them.
        actor_flat, actor_opt, (target_actor, target_critic), loss = jax.lax.cond(
            model.step % config.policy_delay == config.policy_delay - 1,
            delayed,
            not_yet,
        )
        model = model._replace(
            actor=actor_flat,
            critic=critic,
            target_critic=target_critic,
            own=target_actor,
            opt_state=(actor_opt, critic_opt),
        )
        return model, TD3Stats(critic_stats.critic_loss, critic_stats.q_mean, loss)

    return OffPolicyLearner(
        actor, explore, act, init_own, init_opt, learn_step, TD3Stats
    )


def make_train(config: TD3Config) -> Callable[..., TrainOutput]:
    """``train(key, hyperparams, env_params=None) -> TrainOutput``, pure;
    ``metrics[name]`` is ``[num_updates]`` (leading population axes under
    ``vmap``)."""
    return whole_run(make_trainer(config))
