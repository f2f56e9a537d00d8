"""The trained policy of each kind of network, on the learner surface.

``policy(params, carry, obs [..., *obs_shape], key, deterministic, mask=None)
-> (env_action [...], carry)`` with ``params`` a ``PolicyParams`` (the
network's parameters and the obs statistics, applied to ``obs`` first) or the
bare network parameters. Feed-forward policies pass ``carry`` through.
``mask`` ``[..., A]`` bool marks the legal discrete actions.
"""

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from ondevice_rl.networks import PolicyOutput, sample_action
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


def mask_logits(pi: PolicyOutput, mask: jax.Array | None) -> PolicyOutput:
    """``pi`` with illegal discrete actions' logits at −∞."""
    if mask is None or pi.log_std is not None:
        return pi
    return pi._replace(logits_or_mean=jnp.where(mask, pi.logits_or_mean, -jnp.inf))


def actor_critic_policy(agent: Agent, setup: EnvSetup) -> Callable:
    """Samples from the policy head, or acts by the argmax of its logits or
    its Gaussian mean (``deterministic``); Box actions clipped to the space."""

    def policy(params, carry, obs, key, deterministic, mask=None):
        carry, pi = agent.step(*network_input(params, obs, carry))
        pi = mask_logits(pi, mask)
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
        eps = 0.0 if deterministic else epsilon
        if eps == 0.0:
            if mask is not None:
                q = jnp.where(mask, q, -jnp.inf)
            return jnp.argmax(q, axis=-1).astype(jnp.int32), carry
        return epsilon_greedy(key, q, eps, mask), carry

    return policy
