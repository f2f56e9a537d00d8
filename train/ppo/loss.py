"""The clipped PPO objective on one minibatch."""

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.nn.networks import PolicyOutput, entropy, log_prob
from ondevice_rl.train.ppo.config import Hyperparams


class Minibatch(NamedTuple):
    """``[M, ...]`` samples, flattened from the ``[T, B]`` rollout."""

    obs: jax.Array
    action: jax.Array
    log_prob: jax.Array
    value: jax.Array
    advantage: jax.Array
    target: jax.Array


class LossStats(NamedTuple):
    total_loss: jax.Array
    pg_loss: jax.Array
    value_loss: jax.Array
    entropy: jax.Array
    approx_kl: jax.Array
    clip_frac: jax.Array


def ppo_loss(
    apply_fn: Callable[[Any, jax.Array], PolicyOutput],
    params: Any,
    batch: Minibatch,
    hp: Hyperparams,
    normalize_advantages: bool = True,
) -> tuple[jax.Array, LossStats]:
    """Clipped surrogate + clipped value loss − entropy bonus (scalar, stats);
    ``normalize_advantages`` (static) standardises the minibatch's advantages
    first."""
    pi = apply_fn(params, batch.obs)
    new_log_prob = log_prob(pi, batch.action)
    log_ratio = new_log_prob - batch.log_prob
    ratio = jnp.exp(log_ratio)

    adv = batch.advantage
    if normalize_advantages:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    clipped_ratio = jnp.clip(ratio, 1.0 - hp.clip_eps, 1.0 + hp.clip_eps)
    pg_loss = -jnp.minimum(ratio * adv, clipped_ratio * adv).mean()

    value_clipped = batch.value + jnp.clip(
        pi.value - batch.value, -hp.clip_eps, hp.clip_eps
    )
    value_loss = (
        0.5
        * jnp.maximum(
            (pi.value - batch.target) ** 2, (value_clipped - batch.target) ** 2
        ).mean()
    )

    ent = entropy(pi).mean()
    total = pg_loss + hp.vf_coef * value_loss - hp.ent_coef * ent
    stats = LossStats(
        total_loss=total,
        pg_loss=pg_loss,
        value_loss=value_loss,
        entropy=ent,
        approx_kl=jax.lax.stop_gradient(((ratio - 1.0) - log_ratio).mean()),
        clip_frac=jax.lax.stop_gradient(
            (jnp.abs(ratio - 1.0) > hp.clip_eps).astype(jnp.float32).mean()
        ),
    )
    return total, stats
