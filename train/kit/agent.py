"""A learner's network as the kit drives it: with memory or without.

``build_network`` is the network for an env's spaces (an actor-critic or a
Q-network); ``build_agent`` wraps it, behind a recurrent core with memory.

``Agent.step(params, carry, obs [B, ...], first [B] or None) -> (carry,
out)`` acts (``first`` marks observations whose episode starts there: the
carry starts afresh; None: none does);
``Agent.unroll(params, carry, obs [T, M, ...], first [T, M]) -> out [T, M,
...]`` replays sequences for the loss. Without memory (``config.memory ==
"none"``) the carry is ``()`` and both are the network applied as it is, so a
feed-forward learner's program is unchanged.

Observations with an action mask (``ondevice_rl.env.masks``): the agent takes
the mask out before the network and masks the output with it (illegal
logits and action values ``MASKED``), in ``step`` and ``unroll`` alike, so
acting, losses and bootstraps see the same legal actions.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.env.masks import mask_output, split_action_mask
from ondevice_rl.nn.networks import ActorCritic, QNetwork
from ondevice_rl.nn.recurrent import MemoryNet, initial_carry, unroll
from ondevice_rl.train.kit.env_setup import EnvSetup, zero_observation


class Agent(NamedTuple):
    network: Any  # the flax module (a MemoryNet around the head with memory)
    memory: bool
    init: Callable  # key -> params
    initial_carry: Callable  # batch_shape -> carry
    step: Callable
    unroll: Callable


def build_network(setup: EnvSetup, config: Any, kind: str, **kwargs: Any) -> Any:
    """The learner's network for ``setup``'s spaces: ``kind`` "actor_critic"
    or "q"; an MLP torso for vector observations, a CNN for images, the
    encoders of ``ondevice_rl.nn.encoders`` for pytrees, pixels and grids."""
    obs_ndim = setup.obs_encoding
    if kind == "actor_critic":
        return ActorCritic(
            setup.action_dim,
            setup.continuous,
            config.hidden,
            config.activation,
            obs_ndim=obs_ndim,
        )
    return QNetwork(
        setup.action_dim, config.hidden, config.activation, obs_ndim=obs_ndim, **kwargs
    )


def build_agent(setup: EnvSetup, config: Any, kind: str, **kwargs: Any) -> Agent:
    """The agent of ``build_network(setup, config, kind)``, behind a GRU or
    LSTM core of ``config.memory_size`` when ``config.memory`` asks for one."""
    memory = getattr(config, "memory", "none")
    obs = split_action_mask(zero_observation(setup))[0]
    if memory == "none":
        network = build_network(setup, config, kind, **kwargs)

        def no_carry(batch_shape=()):
            return ()

        def step(params, carry, obs, first):
            return carry, apply_masked(network.apply, params, obs)

        def replay(params, carry, obs, first):
            return apply_masked(network.apply, params, obs)

        return Agent(
            network,
            False,
            lambda key: network.init(key, obs),
            no_carry,
            step,
            replay,
        )
    features = setup._replace(
        obs_shape=(config.memory_size,), obs_encoding=1, action_mask=False
    )
    head = build_network(features, config, kind, **kwargs)
    network = MemoryNet(head, memory, config.memory_size, obs_ndim=setup.obs_encoding)

    def carry_for(batch_shape=()):
        return initial_carry(memory, config.memory_size, tuple(batch_shape))

    def init(key):
        return network.init(key, carry_for(), obs, jnp.bool_(True))

    def step(params, carry, obs, first):
        if first is None:  # acting within an episode: no reset
            first = jnp.zeros(jax.tree.leaves(carry)[0].shape[:-1], jnp.bool_)
        obs, mask = split_action_mask(obs)
        carry, out = network.apply(params, carry, obs, first)
        return carry, mask_output(out, mask)

    def replay(params, carry, obs, first):
        obs, mask = split_action_mask(obs)
        return mask_output(unroll(network, params, carry, obs, first), mask)

    return Agent(network, True, init, carry_for, step, replay)


def apply_masked(apply: Callable, params: Any, obs: Any) -> Any:
    """``apply(params, obs)`` on the observation without its action mask,
    the output masked with it (as it is when there is none)."""
    obs, mask = split_action_mask(obs)
    return mask_output(apply(params, obs), mask)


def carry_at(carries: Any, t: int = 0) -> Any:
    """The carry stored at step ``t`` of ``[T, B, ...]`` carries."""
    return jax.tree.map(lambda c: c[t], carries)
