"""A2C fused into one program: rollout → returns → one gradient step, scanned.

Synchronous advantage actor-critic as in PAAC (Clemente et al., 2017): ``B``
environments step together for ``T`` steps, then one optimiser step on the
whole ``[T, B]`` batch. ``make_train(config)`` returns ``train(key,
hyperparams, env_params=None)``, pure, safe to ``jax.jit`` and ``jax.vmap``;
the update's scaffold is the learner kit's (``train/kit/on_policy.py``).
"""

from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import jax
import optax

from ondevice_rl.nn.networks import sample_action
from ondevice_rl.returns import gae, n_step_returns
from ondevice_rl.rollout import Transition
from ondevice_rl.train.a2c.config import A2CConfig, Hyperparams
from ondevice_rl.train.a2c.loss import Batch, a2c_loss
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


class ActorExtras(NamedTuple):
    """What A2C keeps of each rollout step beside the transition, ``[B]``:
    ``value`` only with memory (else computed after the rollout, once)."""

    value: jax.Array | None


def one_step(
    step: Callable, carry: Any, batch: Batch, key: jax.Array
) -> tuple[Any, Any]:
    """PAAC's update: one optimiser step on the whole ``[T, B]`` batch as it
    is (``OnPolicyLearner.steps``)."""
    return step(carry, batch)


def make_learner(config: A2CConfig, setup: EnvSetup) -> OnPolicyLearner:
    """A2C's part of the on-policy update for ``setup``'s env."""
    agent = build_agent(setup, config, "actor_critic")

    def act(pi, key, hp, env_steps, mask):
        action = sample_action(key, pi)  # pi's logits are masked already
        extras = ActorExtras(step_value(agent, pi))
        return action, setup.to_env_action(action), extras

    def batch(traj: Transition, out, final, hp: Hyperparams) -> Batch:
        """Returns of the ``[T, B]`` rollout from the critic's values at
        collection time, which are the current params' (one step per
        rollout). Each step bootstraps from ``V(final_obs)`` where an
        episode was truncated and at the rollout's end."""
        values = rollout_values(traj, out)
        next_values = final.value
        ends = (traj.terminated, traj.truncated)
        if config.use_gae:
            adv, targets = gae(
                traj.reward, values, next_values, *ends, hp.gamma, hp.gae_lambda
            )
        else:
            targets = n_step_returns(traj.reward, next_values, *ends, hp.gamma, n=None)
            adv = targets - values
        return Batch(traj.obs, traj.action, adv, targets)

    def optimizer(hp: Hyperparams, learning_rate) -> optax.GradientTransformation:
        if config.optimizer == "rmsprop":
            step = optax.rmsprop(
                learning_rate, decay=hp.rmsprop_decay, eps=hp.optimizer_eps
            )
        else:
            step = optax.adam(learning_rate, eps=hp.optimizer_eps)
        return optax.chain(optax.clip_by_global_norm(hp.max_grad_norm), step)

    return OnPolicyLearner(
        agent=agent,
        act=act,
        batch=batch,
        loss=partial(a2c_loss, normalize_advantages=config.normalize_advantages),
        optimizer=optimizer,
        policy=actor_critic_policy(agent, setup),
        steps=one_step,
    )


def make_trainer(config: A2CConfig) -> Trainer:
    """Builds the program's pieces."""
    setup = make_env(config.env)
    return on_policy_trainer(config, setup, make_learner(config, setup))


def make_train(config: A2CConfig) -> Callable[..., TrainOutput]:
    """``train(key, hyperparams, env_params=None) -> TrainOutput``, pure;
    ``metrics[name]`` is ``[num_updates]`` (leading population axes under
    ``vmap``)."""
    return whole_run(make_trainer(config))
