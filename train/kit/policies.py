"""The trained policy of each kind of network, on the learner surface.

``policy(params, carry, obs [..., *obs_shape], key, deterministic, mask=None)
-> (env_action [...], carry)`` with ``params`` a ``PolicyParams`` (the
network's parameters and the obs statistics, applied to ``obs`` first) or the
bare network parameters. Feed-forward policies pass ``carry`` through.
``mask`` ``[..., A]`` bool marks the legal discrete actions; an observation
with an action mask (``ondevice_rl.env.masks``) is honoured as well, both masks
together when both are given.
"""

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from ondevice_rl.env.masks import combine_masks, mask_output, split_action_mask
from ondevice_rl.nn.networks import sample_action
from ondevice_rl.normalize import normalize_obs
from ondevice_rl.train.kit.agent import Agent
from ondevice_rl.train.kit.env_setup import EnvSetup
from ondevice_rl.train.kit.exploration import epsilon_greedy
from ondevice_rl.train.kit.state import PolicyParams


def network_input(params: Any, obs: jax.Array, carry: Any) -> tuple:
    """``Agent.step``'s arguments: ``(network params, carry, obs as the
    network sees it, first=None)``."""
    if not isinstance(params, PolicyParams):
        return params, carry, obs, None
    if params.normalizer is not None:
        obs = normalize_obs(params.normalizer, obs)
    return params.network, carry, obs, None


def legal_mask(obs: Any, mask: jax.Array | None) -> jax.Array | None:
    """The legal actions ``[..., A]`` under the observation's action mask
    and ``mask`` (None: every action)."""
    return combine_masks(split_action_mask(obs)[1], mask)


def actor_critic_policy(agent: Agent, setup: EnvSetup) -> Callable:
    """Samples from the policy head, or acts by the argmax of its logits or
    its Gaussian mean (``deterministic``); Box actions clipped to the space."""

    def policy(params, carry, obs, key, deterministic, mask=None):
        carry, pi = agent.step(*network_input(params, obs, carry))
        pi = mask_output(pi, legal_mask(obs, mask))
        if not deterministic:
            action = sample_action(key, pi)
        elif pi.log_std is None:
            action = jnp.argmax(pi.logits_or_mean, axis=-1).astype(jnp.int32)
        else:
            action = pi.logits_or_mean
        return setup.to_env_action(action), carry

    return policy


def q_policy(agent: Agent, epsilon: float) -> Callable:
    """Greedy on the action values (``deterministic``), else ε-greedy with
    ``epsilon`` (the learner's final exploration rate)."""

    def policy(params, carry, obs, key, deterministic, mask=None):
        carry, q = agent.step(*network_input(params, obs, carry))
        mask = legal_mask(obs, mask)
        eps = 0.0 if deterministic else epsilon
        if eps == 0.0:
            q = mask_output(q, mask)
            return jnp.argmax(q, axis=-1).astype(jnp.int32), carry
        return epsilon_greedy(key, q, eps, mask), carry

    return policy
