"""DQN fused into one program, its replay buffer in device memory.

The update (act, store, learn from replay, report) is the kit's
(``train/kit/replay_loop.py``): ``train_frequency`` ε-greedy vector steps
stored in the buffer; once ``learning_starts`` env steps have been taken,
``gradient_steps`` gradient steps on sampled batches. Here are DQN's
ε-greedy acting, its gradient steps and its target update whenever the
env-step count crosses a multiple of ``target_update_every``.
``make_train(config)`` returns ``train(key, hyperparams, env_params=None)``,
pure, safe to ``jax.jit`` and ``jax.vmap``.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from ondevice_rl.cpu.flat_params import flat_apply
from ondevice_rl.env.masks import split_action_mask
from ondevice_rl.replay import ReplayBuffer
from ondevice_rl.train.dqn.config import DQNConfig, Hyperparams
from ondevice_rl.train.dqn.loss import LossStats, bootstrap_values, td_loss, td_targets
from ondevice_rl.train.kit.agent import apply_masked, build_agent
from ondevice_rl.train.kit.branches import cond_or_select
from ondevice_rl.train.kit.env_setup import make_env, require_discrete
from ondevice_rl.train.kit.exploration import epsilon_greedy, linear_epsilon
from ondevice_rl.train.kit.optim import gradient_step
from ondevice_rl.train.kit.policies import q_policy
from ondevice_rl.train.kit.protocol import Trainer, TrainOutput, whole_run
from ondevice_rl.train.kit.replay_loop import ReplayLearner, replay_trainer
from ondevice_rl.train.kit.state import TrainState, initial_state
from ondevice_rl.train.kit.targets import crossed, polyak


class Extra(NamedTuple):
    """DQN's own train-state fields (``TrainState.extra``)."""

    target_params: Any
    buffer: ReplayBuffer  # data: Transition, leaves [C, B, ...], extras ()


def make_trainer(config: DQNConfig) -> Trainer:
    """Builds the program's pieces (ValueError for a continuous action space)."""
    setup = require_discrete(make_env(config.env), "dqn", config.env)
    agent = build_agent(setup, config, "q")
    network = agent.network

    def epsilon(hp: Hyperparams, env_steps) -> jax.Array:
        return linear_epsilon(
            env_steps, config.exploration_steps, hp.eps_start, hp.eps_end
        )

    def act(actor, obs, key):
        params, eps = actor
        q = apply_masked(network.apply, params, obs)
        action = epsilon_greedy(key, q, eps, split_action_mask(obs)[1])
        return action, action, ()

    def collect(state: TrainState, hp: Hyperparams, env_steps):
        return act, (state.params, epsilon(hp, env_steps))

    def optimizer(hp: Hyperparams) -> optax.GradientTransformation:
        return optax.chain(
            optax.clip_by_global_norm(hp.max_grad_norm),
            optax.adam(hp.learning_rate),
        )

    def init(key, hp: Hyperparams, env_params=None) -> TrainState:
        return initial_state(
            key, env_params, setup, agent.init, config, optimizer(hp).init,
            lambda params: Extra(params, ()),
        )  # fmt: skip

    def learn(state: TrainState, buffer: ReplayBuffer, key, hp: Hyperparams):
        """``gradient_steps`` steps, each on ``batch_size`` sampled sequences
        of ``n_step`` steps (``[n_step, batch_size]``); the stats averaged
        over the steps."""
        target_params = state.extra.target_params
        tx = optimizer(hp)
        flat, unravel, apply_fn = flat_apply(network, state.params)

        def step(carry, step_key):
            flat, opt_state = carry
            seq = buffer.sample(step_key, config.batch_size, config.n_step)
            # With an action mask, the values of the next state's legal actions.
            q_next = apply_masked(network.apply, target_params, seq.final_obs)
            # [n, M, A]
            q_online_next = None
            if config.double_dqn:
                q_online_next = apply_masked(apply_fn, flat, seq.final_obs)
            next_values = bootstrap_values(q_next, q_online_next)
            targets = td_targets(seq, next_values, hp.gamma, config.n_step)
            obs = split_action_mask(jax.tree.map(lambda x: x[0], seq.obs))[0]
            flat, opt_state, stats = gradient_step(
                tx, td_loss, apply_fn, flat, opt_state,
                obs, seq.action[0], targets, config.loss,
            )  # fmt: skip
            return (flat, opt_state), stats

        if config.gradient_steps == 1:
            keys = key[None]
        else:
            keys = jax.random.split(key, config.gradient_steps)
        carry = (flat, state.opt_state)
        (flat, opt_state), stats = jax.lax.scan(step, carry, keys)
        learned = (unravel(flat), opt_state, state.extra)
        return learned, jax.tree.map(jnp.mean, stats)

    def settle(params, extra: Extra, hp: Hyperparams, env_steps, episodes) -> Extra:
        """The target update, when the update's env steps cross a multiple
        of ``target_update_every``."""
        done_steps = env_steps + config.steps_per_update
        target_params = cond_or_select(
            crossed(env_steps, done_steps, config.target_update_every),
            lambda: polyak(params, extra.target_params, hp.tau),
            lambda: extra.target_params,
        )
        return extra._replace(target_params=target_params)

    def report(extra, metrics, hp: Hyperparams, env_steps) -> dict:
        return {"epsilon": epsilon(hp, env_steps)}

    policy = q_policy(agent, config.eps_end)
    learner = ReplayLearner(
        network, init, collect, learn, LossStats, policy, settle, report
    )
    return replay_trainer(config, setup, learner)


def make_train(config: DQNConfig) -> Callable[..., TrainOutput]:
    """``train(key, hyperparams, env_params=None) -> TrainOutput``, pure;
    ``metrics[name]`` is ``[num_updates]`` (leading population axes under
    ``vmap``)."""
    return whole_run(make_trainer(config))
