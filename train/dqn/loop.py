"""DQN fused into one program, its replay buffer in device memory.

Each update: ``train_frequency`` ε-greedy vector steps through the generic
rollout, appended to the buffer; once ``learning_starts`` env steps have been
taken, ``gradient_steps`` gradient steps on sampled batches; then a target
update whenever the env-step count crosses a multiple of
``target_update_every``. The buffer is part of the train state (``extra``),
so it is scanned, vmapped over seeds, sharded and checkpointed with the rest.
``make_train(config)`` returns ``train(key, hyperparams, env_params=None)``,
pure, safe to ``jax.jit`` and ``jax.vmap``.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from ondevice_rl.env.masks import split_action_mask
from ondevice_rl.replay import ReplayBuffer
from ondevice_rl.rollout import rollout
from ondevice_rl.train.dqn.config import DQNConfig, Hyperparams
from ondevice_rl.train.dqn.loss import LossStats, bootstrap_values, td_loss, td_targets
from ondevice_rl.train.kit.agent import apply_masked, build_agent
from ondevice_rl.train.kit.branches import cond_or_select
from ondevice_rl.train.kit.env_setup import make_env, require_discrete
from ondevice_rl.train.kit.exploration import epsilon_greedy, linear_epsilon
from ondevice_rl.train.kit.optim import flat_apply, gradient_step
from ondevice_rl.train.kit.policies import q_policy
from ondevice_rl.train.kit.protocol import (
    Trainer,
    TrainOutput,
    feed_forward_trainer,
    whole_run,
)
from ondevice_rl.train.kit.replay import crossed, empty_buffer
from ondevice_rl.train.kit.state import TrainState, advanced, initial_state
from ondevice_rl.train.kit.targets import polyak


class Extra(NamedTuple):
    """DQN's own train-state fields (``TrainState.extra``)."""

    target_params: Any
    buffer: ReplayBuffer  # data: Transition, leaves [C, B, ...], extras ()


def make_trainer(config: DQNConfig) -> Trainer:
    """Builds the program's pieces (ValueError for a continuous action space)."""
    setup = require_discrete(make_env(config.env), "dqn", config.env)
    agent = build_agent(setup, config, "q")
    network = agent.network
    steps_per_update = config.steps_per_update

    def act(actor, obs, key):
        params, eps = actor
        q = apply_masked(network.apply, params, obs)
        action = epsilon_greedy(key, q, eps, split_action_mask(obs)[1])
        return action, action, ()

    def optimizer(hp: Hyperparams) -> optax.GradientTransformation:
        return optax.chain(
            optax.clip_by_global_norm(hp.max_grad_norm),
            optax.adam(hp.learning_rate),
        )

    def empty_extra(params) -> Extra:
        buffer = empty_buffer(setup, config.num_envs, config.buffer_capacity)
        return Extra(params, buffer)

    def init(key, hp: Hyperparams, env_params=None) -> TrainState:
        return initial_state(
            key, env_params, setup, agent.init, config, optimizer(hp).init, empty_extra
        )

    def learn(params, target_params, opt_state, buffer: ReplayBuffer, key, hp):
        """``gradient_steps`` steps, each on ``batch_size`` sampled sequences
        of ``n_step`` steps (``[n_step, batch_size]``); returns ``(params,
        opt_state, LossStats)`` averaged over the steps."""
        tx = optimizer(hp)
        flat, unravel, apply_fn = flat_apply(network, params)

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
        (flat, opt_state), stats = jax.lax.scan(step, (flat, opt_state), keys)
        return unravel(flat), opt_state, jax.tree.map(jnp.mean, stats)

    def update(state: TrainState, hp: Hyperparams, env_params=None):
        env_params = setup.default_params if env_params is None else env_params
        target_params, buffer = state.extra
        env_steps = state.update_step * steps_per_update
        eps = linear_epsilon(
            env_steps, config.exploration_steps, hp.eps_start, hp.eps_end
        )
        rollout_state, traj, episodes = rollout(
            setup.env,
            env_params,
            act,
            (state.params, eps),
            state.rollout,
            config.train_frequency,
        )
        buffer = buffer.add(traj)
        key, learn_key = jax.random.split(rollout_state.key)
        done_steps = env_steps + steps_per_update
        ready = (done_steps >= config.learning_starts) & buffer.can_sample(
            config.n_step
        )
        params, opt_state, stats = cond_or_select(
            ready,
            lambda: learn(
                state.params, target_params, state.opt_state, buffer, learn_key, hp
            ),
            lambda: (
                state.params,
                state.opt_state,
                LossStats(jnp.float32(0.0), jnp.float32(0.0)),
            ),
        )
        target_params = cond_or_select(
            crossed(env_steps, done_steps, config.target_update_every),
            lambda: polyak(params, target_params, hp.tau),
            lambda: target_params,
        )
        new_state, metrics = advanced(
            state, rollout_state, key, episodes,
            params=params, opt_state=opt_state, extra=Extra(target_params, buffer),
        )  # fmt: skip
        return new_state, {**metrics, **stats._asdict(), "epsilon": eps}

    policy = q_policy(agent, config.eps_end)
    return feed_forward_trainer(config, setup, network, init, update, policy)


def make_train(config: DQNConfig) -> Callable[..., TrainOutput]:
    """``train(key, hyperparams, env_params=None) -> TrainOutput``, pure;
    ``metrics[name]`` is ``[num_updates]`` (leading population axes under
    ``vmap``)."""
    return whole_run(make_trainer(config))
