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
from ondevice_rl.train.kit.env_setup import EnvSetup
from ondevice_rl.train.kit.exploration import epsilon_greedy
from ondevice_rl.train.kit.state import PolicyParams


def network_input(params: Any, obs: jax.Array) -> tuple[Any, jax.Array]:
    """``(network params, obs as the network sees it)``."""
    if not isinstance(params, PolicyParams):
        return params, obs
    if params.normalizer is not None:
        obs = normalize_obs(params.normalizer, obs)
    return params.network, obs


def mask_logits(pi: PolicyOutput, mask: jax.Array | None) -> PolicyOutput:
    """``pi`` with illegal discrete actions' logits at −∞."""
    if mask is None or pi.log_std is not None:
        return pi
    return pi._replace(logits_or_mean=jnp.where(mask, pi.logits_or_mean, -jnp.inf))


def actor_critic_policy(network: Any, setup: EnvSetup) -> Callable:
    """Samples from the policy head, or acts by the argmax of its logits or
    its Gaussian mean (``deterministic``); Box actions clipped to the space."""

    def policy(params, carry, obs, key, deterministic, mask=None):
        pi = mask_logits(network.apply(*network_input(params, obs)), mask)
        if not deterministic:
            action = sample_action(key, pi)
        elif pi.log_std is None:
            action = jnp.argmax(pi.logits_or_mean, axis=-1).astype(jnp.int32)
        else:
            action = pi.logits_or_mean
        return setup.to_env_action(action), carry

    return policy


def q_policy(network: Any, epsilon: float) -> Callable:
    """Greedy on the action values (``deterministic``), else ε-greedy with
    ``epsilon`` (the learner's final exploration rate)."""

    def policy(params, carry, obs, key, deterministic, mask=None):
        q = network.apply(*network_input(params, obs))
        eps = 0.0 if deterministic else epsilon
        if eps == 0.0:
            if mask is not None:
                q = jnp.where(mask, q, -jnp.inf)
            return jnp.argmax(q, axis=-1).astype(jnp.int32), carry
        return epsilon_greedy(key, q, eps, mask), carry

    return policy
