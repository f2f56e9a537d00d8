"""SAC fused into one program, its replay buffer in device memory.

The update (act, store, learn from replay, report) is the kit's
(``train/kit/replay_loop.py``, with what SAC and TD3 share in
``train/kit/off_policy_trainer.py``); here are SAC's actor, its exploration,
its temperature and its gradient step. ``make_train(config)`` returns
``train(key, hyperparams, env_params=None)``, pure, safe to ``jax.jit`` and
``jax.vmap``.
"""

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp

from ondevice_rl.nn.continuous_control import SquashedGaussianActor, squashed_sample
from ondevice_rl.train.kit.off_policy import Model, critic_loss, first_step
from ondevice_rl.train.kit.off_policy_trainer import (
    OffPolicyLearner,
    off_policy_trainer,
)
from ondevice_rl.train.kit.optim import gradient_step
from ondevice_rl.train.kit.protocol import Trainer, TrainOutput, whole_run
from ondevice_rl.train.kit.targets import polyak
from ondevice_rl.train.sac.config import Hyperparams, SACConfig
from ondevice_rl.train.sac.loss import (
    SACStats,
    actor_loss,
    soft_targets,
    temperature_loss,
)


def make_trainer(config: SACConfig) -> Trainer:
    """Builds the program's pieces (ValueError for a discrete or unbounded
    action space)."""
    return off_policy_trainer(config, "sac", functools.partial(_learner, config))


def make_train(config: SACConfig) -> Callable[..., TrainOutput]:
    """``train(key, hyperparams, env_params=None) -> TrainOutput``, pure;
    ``metrics[name]`` is ``[num_updates]`` (leading population axes under
    ``vmap``)."""
    return whole_run(make_trainer(config))


def _learner(config: SACConfig, action_dim: int, obs_ndim: int) -> OffPolicyLearner:
    actor = SquashedGaussianActor(
        action_dim, config.hidden, config.activation, obs_ndim
    )

    def explore(params, obs, key, hp):
        return squashed_sample(key, *actor.apply(params, obs))[0]

    def act(params, obs, key, deterministic):
        mean, log_std = actor.apply(params, obs)
        if deterministic:
            return jnp.tanh(mean)
        return squashed_sample(key, mean, log_std)[0]

    def init_own(params, hp: Hyperparams):
        return jnp.log(hp.alpha).astype(jnp.float32)  # log α

    def init_opt(tx, actor_flat, critic_flat, log_alpha):
        return tx.init(actor_flat), tx.init(critic_flat), tx.init(log_alpha)

    def learn_step(nets, tx, model: Model, seq, key, hp: Hyperparams):
        obs = first_step(seq.obs)  # [M, ...] leaves (a pytree observation's too)
        target_key, actor_key = jax.random.split(key)
        actor_opt, critic_opt, alpha_opt = model.opt_state
        alpha = jnp.exp(model.own[0])
        targets = soft_targets(
            nets, model, seq, target_key, alpha, hp.gamma, config.n_step
        )
        critic, critic_opt, critic_stats = gradient_step(
            tx, critic_loss, nets.critic, model.critic, critic_opt,
            obs, seq.action[0], targets,
        )  # fmt: skip
        critics = functools.partial(nets.critic, critic)
        actor_flat, actor_opt, actor_stats = gradient_step(
            tx, actor_loss, nets.actor, model.actor, actor_opt,
            critics, obs, actor_key, alpha,
        )  # fmt: skip
        log_alpha = model.own
        if config.learn_alpha:
            target = hp.target_entropy * action_dim
            log_alpha, alpha_opt, _ = gradient_step(
                tx, temperature_loss, None, log_alpha, alpha_opt,
                actor_stats.log_prob, target,
            )  # fmt: skip
        model = model._replace(
            actor=actor_flat,
            critic=critic,
            target_critic=polyak(critic, model.target_critic, hp.tau),
            own=log_alpha,
            opt_state=(actor_opt, critic_opt, alpha_opt),
        )
        stats = SACStats(
            critic_stats.critic_loss,
            critic_stats.q_mean,
            actor_stats.actor_loss,
            -actor_stats.log_prob,
            alpha,
        )
        return model, stats

    return OffPolicyLearner(
        actor, explore, act, init_own, init_opt, learn_step, SACStats
    )
