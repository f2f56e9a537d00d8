"""The on-policy update, written once: rollout → returns → optimiser steps
→ metrics, scanned over updates.

A learner (PPO, A2C, PQN) supplies an ``OnPolicyLearner``: how it acts on its
network's output, what it learns on, its loss, its optimiser and, if not
epochs × shuffled minibatches, how its optimiser steps go over the batch.
``on_policy_trainer`` builds the whole ``Trainer`` around them, with or
without memory (``train/kit/agent.py``). With memory the carry lives in the
rollout state, starts afresh inside the rollout where an episode starts, and
each step's carry is stored so the loss replays whole sequences from the
state they were acted in; minibatches then split environments, not time.
``on_policy_learn`` is the update's learning half on its own (what it does
with one rollout), for code that collects rollouts some other way.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.cpu.flat_params import ravel_params
from ondevice_rl.devices.sharding import all_mean
from ondevice_rl.env.masks import split_action_mask
from ondevice_rl.normalize import normalize_obs, normalize_rollout
from ondevice_rl.rollout import Transition, rollout
from ondevice_rl.train.kit.agent import Agent, carry_at
from ondevice_rl.train.kit.env_setup import EnvSetup
from ondevice_rl.train.kit.minibatches import shuffled_minibatches
from ondevice_rl.train.kit.optim import gradient_step
from ondevice_rl.train.kit.protocol import Trainer, at_config_precision, scan_updates
from ondevice_rl.train.kit.schedules import learning_rate_fn
from ondevice_rl.train.kit.state import TrainState, advanced, initial_state


class OnPolicyLearner(NamedTuple):
    """What is a learner's own in the on-policy update.

    Attributes:
        agent: its network (``build_agent``).
        act: ``(out, key, hp, env_steps, mask) -> (action, env_action,
            extras)`` from the network's output ``out`` for ``[B]``
            observations (``extras`` are kept in the ``Transition``);
            ``mask`` ``[B, A]`` bool, the observations' action mask or None
            (``out`` is already masked with it: ε-greedy needs it too).
        batch: ``(traj [T, B], out, final_out, hp) -> batch``, what the
            loss learns on (returns, advantages ...; its ``obs`` field the
            observations), leaves ``[T, B, ...]``; ``out`` and
            ``final_out`` are the network's outputs for ``traj.obs`` and
            ``traj.final_obs`` (bootstraps), ``out`` None with memory
            (``rollout_outputs``).
        loss: ``(apply_fn, flat_params, batch, hp) -> (loss, stats)``,
            ``stats`` a NamedTuple of scalars.
        optimizer: ``(hp, learning_rate) -> optax.GradientTransformation``
            with ``learning_rate`` a ``count -> lr`` schedule.
        policy: the trained policy (``train/kit/policies.py``).
        metrics: ``(hp, env_steps) -> dict`` of extra per-update metrics.
        steps: ``(step, carry, batch, key) -> (carry, stats)``, the
            update's optimiser steps over the batch (leaves ``[T, B,
            ...]``), each ``step(carry, samples) -> (carry, stats)``, stats
            averaged over them; None: ``minibatch_epochs``.
    """

    agent: Agent
    act: Callable
    batch: Callable
    loss: Callable
    optimizer: Callable
    policy: Callable
    metrics: Callable = lambda hp, env_steps: {}
    steps: Callable | None = None


class Memory(NamedTuple):
    """Per-step memory kept beside a recurrent learner's extras, ``[B, ...]``."""

    first: jax.Array  # bool, the obs starts an episode (the carry was reset)
    carry: Any  # the carry before the step (before that reset)
    next_carry: Any  # the carry after the step, before any reset


class Sequences(NamedTuple):
    """A recurrent loss's input in place of ``batch.obs``, ``[T, M, ...]``."""

    obs: jax.Array
    first: jax.Array
    carry: Any  # only step 0's is read


def rollout_outputs(agent: Agent, params: Any, traj: Transition) -> tuple[Any, Any]:
    """``(out, final_out)``: the network's outputs for ``traj.obs`` and
    ``traj.final_obs`` ``[T, B]``, from the params the rollout acted with.

    Without memory ``out`` is computed here, over the whole rollout at once,
    so a learner's ``act`` need not evaluate (nor store) what only its
    returns use, such as a critic's values: a step of the rollout runs the
    actor alone, and the critic runs as ``[T·B]``-row matmuls instead of
    ``T`` of ``B`` rows (the same values up to the matmul kernels' summation
    order). With memory ``out`` is None: a step's output depends on the
    carry it was acted with, so the learner keeps what it needs in its
    extras.
    """
    final = bootstrap_outputs(agent, params, traj)
    if agent.memory:
        return None, final
    return agent.step(params, (), traj.obs, None)[1], final


def step_value(agent: Agent, out: Any) -> jax.Array | None:
    """The critic's value an actor-critic keeps of a rollout step (its
    extras' ``value``): ``out.value`` with memory, else None, since
    ``rollout_outputs`` computes it after the rollout."""
    return out.value if agent.memory else None


def rollout_values(traj: Transition, out: Any) -> jax.Array:
    """The critic's values for ``traj.obs`` ``[T, B]``: ``out.value`` from
    ``rollout_outputs``, or with memory (``out`` None) the ones kept per
    step in ``traj.extras.value`` (``step_value``)."""
    return traj.extras.value if out is None else out.value


def bootstrap_outputs(agent: Agent, params: Any, traj: Transition) -> Any:
    """The network's outputs for ``traj.final_obs`` ``[T, B]`` (truncation
    and end-of-rollout bootstraps). With memory, each from the carry after
    its step, before the reset of a new episode: the episode's own memory."""
    carry = traj.extras[1].next_carry if agent.memory else ()
    return agent.step(params, carry, traj.final_obs, None)[1]


def scheduled_optimizer(config: Any, learner: OnPolicyLearner, hp: Any) -> Any:
    """The learner's optimiser with ``config.lr_schedule`` over the run's
    optimiser steps (``update_epochs × num_minibatches`` per update)."""
    steps = config.update_epochs * config.num_minibatches
    lr = learning_rate_fn(
        config.lr_schedule, hp.learning_rate, config.num_updates, steps
    )
    return learner.optimizer(hp, lr)


def minibatch_epochs(config: Any, memory: bool, num_devices: int = 1) -> Callable:
    """``OnPolicyLearner.steps`` of ``config.update_epochs`` epochs, each a
    pass over ``config.num_minibatches`` shuffled minibatches of the ``[T,
    B]`` batch: flat ``[T·B]`` samples without memory; with it whole
    environments' sequences, each minibatch ``[T, M, ...]``. Data-parallel,
    ``B`` is a device's ``B / num_devices`` environments."""
    epochs, minibatches = config.update_epochs, config.num_minibatches
    local_batch = config.batch_size // num_devices

    def split(batch):
        """``[T, B, ...]`` leaves as the minibatches' samples: flat ``[T·B,
        ...]`` without memory, ``[B, T, ...]`` sequences with it."""
        if memory:
            return jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), batch)
        return jax.tree.map(lambda x: x.reshape((local_batch,) + x.shape[2:]), batch)

    def steps(step, carry, batch, key):
        samples = split(batch)

        def minibatch_step(carry, minibatch):
            if memory:  # [M, T] -> [T, M]
                minibatch = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), minibatch)
            return step(carry, minibatch)

        def epoch(carry, epoch_key):
            shuffled = shuffled_minibatches(epoch_key, samples, minibatches)
            with jax.named_scope("minibatches"):
                return jax.lax.scan(minibatch_step, carry, shuffled)

        keys = jax.random.split(key, epochs)
        with jax.named_scope("epochs"):
            carry, stats = jax.lax.scan(epoch, carry, keys)
        return carry, jax.tree.map(jnp.mean, stats)

    return steps


def on_policy_learn(
    config: Any,
    learner: OnPolicyLearner,
    axis_name: str | None = None,
    num_devices: int = 1,
) -> Callable:
    """``learn(params, opt_state, traj [T, B], key, hp) -> (params,
    opt_state, stats)``: the learner's batch from one rollout (as the
    update passes it: observations standardised, rewards scaled), then its
    optimiser steps; the stats averaged over all steps (and over the
    devices of ``axis_name``, ``num_devices`` of them, as in
    ``on_policy_trainer``)."""
    agent = learner.agent
    steps = learner.steps or minibatch_epochs(config, agent.memory, num_devices)

    def learn(params, opt_state, traj: Transition, key, hp):
        out, final = rollout_outputs(agent, params, traj)
        memory = traj.extras[1] if agent.memory else None
        if agent.memory:
            traj = traj._replace(extras=traj.extras[0])
        batch = learner.batch(traj, out, final, hp)
        if agent.memory:
            batch = batch._replace(obs=Sequences(batch.obs, memory.first, memory.carry))
        tx = scheduled_optimizer(config, learner, hp)
        flat, unravel = ravel_params(params)

        def apply_fn(flat_params, obs):
            params = unravel(flat_params)
            if agent.memory:
                return agent.unroll(params, carry_at(obs.carry), obs.obs, obs.first)
            return agent.unroll(params, (), obs, None)

        def step(carry, samples):
            flat, opt_state = carry
            flat, opt_state, stats = gradient_step(
                tx, learner.loss, apply_fn, flat, opt_state, samples, hp,
                axis_name=axis_name,
            )  # fmt: skip
            return (flat, opt_state), stats

        (flat, opt_state), stats = steps(step, (flat, opt_state), batch, key)
        if axis_name is not None:
            stats = all_mean(stats, axis_name)
        return unravel(flat), opt_state, stats

    return learn


def on_policy_trainer(
    config: Any,
    setup: EnvSetup,
    learner: OnPolicyLearner,
    axis_name: str | None = None,
    num_devices: int = 1,
) -> Trainer:
    """The ``Trainer`` of an on-policy learner.

    ``config`` has ``num_envs``, ``num_steps``, ``update_epochs``,
    ``num_minibatches``, ``num_updates`` and ``lr_schedule``. With
    ``axis_name`` set, ``run`` is the per-device body of a data-parallel
    run inside ``jax.shard_map`` over ``num_devices`` devices: each holds
    ``num_envs / num_devices`` environments, gradients and statistics are
    averaged over the axis. ``init`` builds the global state.
    """
    agent = learner.agent
    learn = on_policy_learn(config, learner, axis_name, num_devices)

    def init(key, hp, env_params=None) -> TrainState:
        init_opt_state = scheduled_optimizer(config, learner, hp).init
        state = initial_state(
            key, env_params, setup, agent.init, config, init_opt_state
        )
        carry = agent.initial_carry((config.num_envs,))
        return state._replace(rollout=state.rollout._replace(agent=carry))

    def update(state: TrainState, hp, env_params=None):
        env_params = setup.default_params if env_params is None else env_params
        norm = state.normalizer
        env_steps = state.update_step * config.steps_per_update

        def act(params, obs, key, carry=(), first=None):
            obs = normalize_obs(norm, obs)
            next_carry, out = agent.step(params, carry, obs, first)
            mask = split_action_mask(obs)[1]
            action, env_action, extras = learner.act(out, key, hp, env_steps, mask)
            if not agent.memory:
                return action, env_action, extras
            memory = Memory(first, carry, next_carry)
            return action, env_action, (extras, memory), next_carry

        rollout_state, traj, episodes = rollout(
            setup.env,
            env_params,
            act,
            state.params,
            state.rollout,
            config.num_steps,
            memory=agent.memory,
        )
        norm, traj = normalize_rollout(norm, traj, hp.gamma)
        key, learn_key = jax.random.split(rollout_state.key)
        params, opt_state, stats = learn(
            state.params, state.opt_state, traj, learn_key, hp
        )
        new_state, metrics = advanced(
            state, rollout_state, key, episodes, axis_name,
            params=params, opt_state=opt_state, normalizer=norm,
        )  # fmt: skip
        extra = learner.metrics(hp, env_steps)
        return new_state, {**metrics, **stats._asdict(), **extra}

    return at_config_precision(
        Trainer(
            config,
            setup,
            agent.network,
            init,
            scan_updates(update),
            learner.policy,
            agent.initial_carry,
        )
    )
