"""The advantage actor-critic objective on one ``[T, B]`` rollout."""

from collections.abc import Callable
from typing import Any, NamedTuple

import jax

from ondevice_rl.nn.networks import PolicyOutput, entropy, log_prob
from ondevice_rl.train.a2c.config import Hyperparams


class Batch(NamedTuple):
    """The rollout's samples, leaves ``[T, B, ...]``."""

    obs: jax.Array  # [T, B, *obs_shape]
    action: jax.Array  # [T, B] int32 or [T, B, A] float32
    advantage: jax.Array  # [T, B], a constant of the loss
    target: jax.Array  # [T, B] value target, a constant of the loss


class LossStats(NamedTuple):
    total_loss: jax.Array
    pg_loss: jax.Array
    value_loss: jax.Array
    entropy: jax.Array


def a2c_loss(
    apply_fn: Callable[[Any, jax.Array], PolicyOutput],
    params: Any,
    batch: Batch,
    hp: Hyperparams,
    normalize_advantages: bool = False,
) -> tuple[jax.Array, LossStats]:
    """Policy gradient + ``vf_coef`` × value loss − ``ent_coef`` × entropy.

    ``pg_loss = −mean(log π(a|s) · A)``, ``value_loss = ½·mean((V(s) −
    target)²)``, means over all ``T × B`` samples. Returns ``(scalar,
    LossStats)``. ``normalize_advantages`` (static) standardises ``A`` over
    the batch first.
    """
    pi = apply_fn(params, batch.obs)
    adv = batch.advantage
    if normalize_advantages:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    pg_loss = -(log_prob(pi, batch.action) * adv).mean()
    value_loss = 0.5 * ((pi.value - batch.target) ** 2).mean()
    ent = entropy(pi).mean()
    total = pg_loss + hp.vf_coef * value_loss - hp.ent_coef * ent
    return total, LossStats(total, pg_loss, value_loss, ent)
