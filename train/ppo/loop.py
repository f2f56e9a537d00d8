"""PPO fused into one program: rollout → GAE → epochs × minibatches, scanned.

``make_train(config)`` returns ``train(key, hyperparams, env_params=None)``, a
pure function safe to ``jax.jit`` and ``jax.vmap``; ``make_trainer(config)``
exposes the same program in pieces (``train/kit/protocol.py``). The update's
scaffold is the learner kit's (``train/kit/on_policy.py``); what is PPO's own
is here and in ``loss.py``.
"""

from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import jax
import optax

from ondevice_rl.nn.networks import log_prob, sample_action
from ondevice_rl.returns import gae
from ondevice_rl.rollout import Transition
from ondevice_rl.train.kit.agent import build_agent
from ondevice_rl.train.kit.env_setup import EnvSetup, make_env
from ondevice_rl.train.kit.on_policy import (
    OnPolicyLearner,
    on_policy_trainer,
    rollout_values,
    step_value,
)
from ondevice_rl.train.kit.policies import actor_critic_policy
from ondevice_rl.train.kit.protocol import Trainer, TrainOutput, whole_run
from ondevice_rl.train.ppo.config import Hyperparams, PPOConfig
from ondevice_rl.train.ppo.loss import Minibatch, ppo_loss


class ActorExtras(NamedTuple):
    """What PPO keeps of each rollout step beside the transition, ``[B]``;
    ``value`` only with memory (else computed after the rollout, once)."""

    log_prob: jax.Array
    value: jax.Array | None


def make_learner(config: PPOConfig, setup: EnvSetup) -> OnPolicyLearner:
    """PPO's part of the on-policy update for ``setup``'s env."""
    agent = build_agent(setup, config, "actor_critic")

    def act(pi, key, hp, env_steps, mask):
        action = sample_action(key, pi)  # pi's logits are masked already
        extras = ActorExtras(log_prob(pi, action), step_value(agent, pi))
        return action, setup.to_env_action(action), extras

    def batch(traj: Transition, out, final, hp: Hyperparams) -> Minibatch:
        """GAE over the ``[T, B]`` rollout, bootstrapping from ``V(final_obs)``
        where an episode was truncated and at the rollout's end."""
        extras = traj.extras
        values = rollout_values(traj, out)
        adv, targets = gae(
            traj.reward,
            values,
            final.value,
            traj.terminated,
            traj.truncated,
            hp.gamma,
            hp.gae_lambda,
        )
        return Minibatch(traj.obs, traj.action, extras.log_prob, values, adv, targets)

    def optimizer(hp: Hyperparams, learning_rate) -> optax.GradientTransformation:
        return optax.chain(
            optax.clip_by_global_norm(hp.max_grad_norm),
            optax.adam(learning_rate, eps=1e-5),
        )

    policy = actor_critic_policy(agent, setup)
    loss = partial(ppo_loss, normalize_advantages=config.normalize_advantages)
    return OnPolicyLearner(agent, act, batch, loss, optimizer, policy)


def make_trainer(
    config: PPOConfig, axis_name: str | None = None, num_devices: int = 1
) -> Trainer:
    """Builds the program's pieces; with ``axis_name`` the per-device bodies
    of a data-parallel run (``train/ppo/data_parallel.py``)."""
    if axis_name is not None and (config.normalize_obs or config.normalize_rewards):
        raise ValueError("data-parallel PPO does not normalise obs or rewards")
    if axis_name is not None and config.memory != "none":
        raise ValueError("data-parallel PPO has no memory (use memory='none')")
    setup = make_env(config.env)
    learner = make_learner(config, setup)
    return on_policy_trainer(config, setup, learner, axis_name, num_devices)


def make_train(config: PPOConfig) -> Callable[..., TrainOutput]:
    """``train(key, hyperparams, env_params=None) -> TrainOutput``, pure;
    ``metrics[name]`` is ``[num_updates]`` (leading population axes under
    ``vmap``)."""
    return whole_run(make_trainer(config))
