"""The off-policy actor-critics (SAC, TD3) on the replay update
(``train/kit/replay_loop.py``): what they share of acting, learning and
reporting.

A learner supplies an ``OffPolicyLearner``: its actor, how it explores, how
its trained policy acts, its own state (SAC's temperature, TD3's target
actor), its optimiser states and its gradient step. ``off_policy_trainer``
builds the ``ReplayLearner`` and the ``Trainer`` around them:

* the train state's ``params`` are the actor's (what acting needs); the
  twin critics, their target, the learner's own state, the replay buffer
  (raw observations) and the window of last finished episodes go in
  ``extra`` (``OffPolicyExtra``);
* actions live in the unit box ``[-1, 1]^A``, stored as such, and are mapped
  onto the env's Box (``ondevice_rl.nn.continuous_control.BoxScale``) to act;
  until ``learning_starts`` env steps have been taken they are uniform;
* each of an update's ``g`` gradient steps learns on sampled ``[n_step,
  batch_size]`` sequences whose observations are standardised with the
  current statistics (``normalize_obs``);
* ``episode_return`` is the mean return of the last ``FINAL_WINDOW``
  finished episodes (an update of one env step seldom ends one), so the
  final return reads the last finished episodes.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from ondevice_rl.cpu.flat_params import ravel_params
from ondevice_rl.nn.continuous_control import BoxScale, TwinCritic
from ondevice_rl.normalize import normalize_obs
from ondevice_rl.replay import ReplayBuffer
from ondevice_rl.train.kit.env_setup import EnvSetup, make_env, zero_observation
from ondevice_rl.train.kit.off_policy import Model, Nets, OffPolicyConfig, RecentReturns
from ondevice_rl.train.kit.protocol import Trainer
from ondevice_rl.train.kit.replay_loop import ReplayLearner, replay_trainer
from ondevice_rl.train.kit.schedules import learning_rate_fn
from ondevice_rl.train.kit.state import PolicyParams, TrainState, initial_state


class OffPolicyLearner(NamedTuple):
    """What is a learner's own in the off-policy update.

    Attributes:
        actor: its actor module (``obs -> output``).
        explore: ``(actor_params, obs [B, ...], key, hp) -> [B, A]`` unit
            actions while collecting, once ``learning_starts`` has passed.
        act: ``(actor_params, obs [..., *obs_shape], key, deterministic) ->
            [..., A]`` unit actions of the trained policy.
        init_own: ``(actor_params, hp) -> own``, its own state (a pytree).
        init_opt: ``(tx, flat_actor, flat_critic, flat_own) ->
            opt_state``.
        learn_step: ``(nets, tx, model, seq [n_step, M], key, hp) -> (model,
            stats)``: one gradient step (``model.step`` is advanced by the
            loop), ``stats`` a NamedTuple of scalars.
        stats: the class of those stats (zeros before learning starts).
    """

    actor: Any
    explore: Callable
    act: Callable
    init_own: Callable
    init_opt: Callable
    learn_step: Callable
    stats: type


class OffPolicyExtra(NamedTuple):
    """The off-policy learners' own train-state fields (``TrainState.extra``)."""

    critic: Any  # the twin critics' params, leaves [2, ...]
    target_critic: Any
    own: Any  # the learner's own state (``OffPolicyLearner.init_own``)
    buffer: ReplayBuffer  # data: Transition, leaves [C, B, ...], unit actions
    gradient_steps: jax.Array  # [] int32, taken so far
    recent: RecentReturns


def require_continuous(setup: EnvSetup, learner: str, env_name: str) -> BoxScale:
    """The map from the unit box onto ``setup``'s action Box, or a one-line
    ValueError if its action space is discrete or unbounded."""
    if not setup.continuous:
        raise ValueError(
            f"{learner} needs a continuous action space; {env_name} has a "
            "discrete one (try ppo, a2c, dqn or pqn)"
        )
    try:
        return BoxScale.of(setup.env.action_space(setup.default_params))
    except ValueError as e:
        raise ValueError(f"{learner} cannot act in {env_name}: {e}") from None


def optimizer(hp: Any, learning_rate: jax.Array) -> optax.GradientTransformation:
    """Adam after a global-norm clip at ``hp.max_grad_norm``."""
    return optax.chain(
        optax.clip_by_global_norm(hp.max_grad_norm), optax.adam(learning_rate)
    )


def off_policy_trainer(
    config: OffPolicyConfig, name: str, make_learner: Callable
) -> Trainer:
    """The ``Trainer`` of an off-policy learner: ``make_learner(action_dim,
    obs_ndim) -> OffPolicyLearner`` for the env of ``config.env`` (a
    one-line ValueError, naming ``name``, for a discrete or unbounded action
    space)."""
    setup = make_env(config.env)
    box = require_continuous(setup, name, config.env)
    obs_ndim = setup.obs_encoding  # a rank, or the encoders' ObsLayout
    learner = make_learner(setup.action_dim, obs_ndim)
    critic_net = TwinCritic(config.hidden, config.activation, obs_ndim)
    obs_zeros = zero_observation(setup)
    schedule = learning_rate_fn(config.lr_schedule, 1.0, config.num_updates, 1)

    def init(key, hp, env_params=None) -> TrainState:
        critic_key, key = jax.random.split(key)
        critic = critic_net.init(critic_key, obs_zeros, jnp.zeros(setup.action_dim))
        state = initial_state(
            key,
            env_params,
            setup,
            lambda net_key: learner.actor.init(net_key, obs_zeros),
            config,
            lambda flat: (),
        )
        own = learner.init_own(state.params, hp)
        opt_state = learner.init_opt(
            optimizer(hp, hp.learning_rate),
            *(ravel_params(x)[0] for x in (state.params, critic, own)),
        )
        extra = OffPolicyExtra(
            critic, critic, own, (), jnp.int32(0), RecentReturns.create()
        )
        return state._replace(opt_state=opt_state, extra=extra)

    def collect(state: TrainState, hp, env_steps):
        warmup = env_steps < config.learning_starts

        def act(params, obs, key):
            actor, normalizer = params
            explore_key, uniform_key = jax.random.split(key)
            chosen = learner.explore(
                actor, normalize_obs(normalizer, obs), explore_key, hp
            )
            uniform = jax.random.uniform(uniform_key, chosen.shape, minval=-1.0)
            unit = jnp.where(warmup, uniform, chosen)
            return unit, setup.to_env_action(box.to_box(unit)), ()

        return act, (state.params, state.normalizer)

    def learn(state: TrainState, buffer, key, hp):
        """``config.gradient_steps`` steps on the actor, the critics, their
        target and the learner's own state."""
        extra, normalizer = state.extra, state.normalizer
        parts = (state.params, extra.critic, extra.target_critic, extra.own)
        flats, unravels = zip(*(ravel_params(x) for x in parts), strict=True)
        actor_tree, critic_tree = unravels[0], unravels[1]
        nets = Nets(
            lambda flat, obs: learner.actor.apply(actor_tree(flat), obs),
            lambda flat, obs, action: critic_net.apply(critic_tree(flat), obs, action),
        )
        tx = optimizer(hp, hp.learning_rate * schedule(state.update_step))
        model = Model(*flats, state.opt_state, extra.gradient_steps)

        def step(model, step_key):
            sample_key, learn_key = jax.random.split(step_key)
            seq = buffer.sample(sample_key, config.batch_size, config.n_step)
            seq = seq._replace(
                obs=normalize_obs(normalizer, seq.obs),
                final_obs=normalize_obs(normalizer, seq.final_obs),
            )
            model, stats = learner.learn_step(nets, tx, model, seq, learn_key, hp)
            return model._replace(step=model.step + 1), stats

        keys = jax.random.split(key, config.gradient_steps)
        model, stats = jax.lax.scan(step, model, keys)
        actor, critic, target, own = (
            unravel(flat) for unravel, flat in zip(unravels, model[:4], strict=True)
        )
        extra = extra._replace(
            critic=critic, target_critic=target, own=own, gradient_steps=model.step
        )
        return (actor, model.opt_state, extra), jax.tree.map(jnp.mean, stats)

    def settle(params, extra, hp, env_steps, episodes):
        return extra._replace(recent=extra.recent.add(episodes))

    def report(extra, metrics, hp, env_steps):
        recent = extra.recent
        return {
            "episode_return": jnp.where(
                recent.count > 0, recent.mean(), metrics["episode_return"]
            )
        }

    def policy(params, carry, obs, key, deterministic, mask=None):
        actor = params
        if isinstance(params, PolicyParams):
            actor = params.network
            if params.normalizer is not None:
                obs = normalize_obs(params.normalizer, obs)
        unit = learner.act(actor, obs, key, deterministic)
        return setup.to_env_action(box.to_box(unit)), carry

    replay_learner = ReplayLearner(
        learner.actor, init, collect, learn, learner.stats, policy, settle, report
    )
    return replay_trainer(config, setup, replay_learner)
