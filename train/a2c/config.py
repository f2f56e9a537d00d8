"""A2C's static configuration and its traced hyperparameters."""

from dataclasses import dataclass
from typing import NamedTuple

import jax

from ondevice_rl.train.kit.algorithm import (
    NON_NEGATIVE,
    POSITIVE,
    UNIT,
    AlgorithmConfig,
    RolloutSizes,
)

OPTIMIZERS = ("rmsprop", "adam")


class Hyperparams(NamedTuple):
    """Scalar coefficients, traced float32 leaves: sweeping them never recompiles.

    Leaves may carry a leading population axis ``[P]`` under ``jax.vmap``.
    ``gae_lambda`` is read only with ``use_gae``, ``rmsprop_decay`` only with
    the RMSprop optimiser; ``optimizer_eps`` is RMSprop's or Adam's ε.
    """

    learning_rate: jax.Array
    gamma: jax.Array
    gae_lambda: jax.Array
    ent_coef: jax.Array
    vf_coef: jax.Array
    max_grad_norm: jax.Array
    rmsprop_decay: jax.Array
    optimizer_eps: jax.Array


HYPERPARAM_FIELDS = Hyperparams._fields


@dataclass(frozen=True)
class A2CConfig(RolloutSizes, AlgorithmConfig):
    """Everything that sets a shape or a loop length (static), plus defaults
    for the traced hyperparameters (``config.hyperparams``).

    Each update collects ``num_steps`` steps of ``num_envs`` environments and
    takes one gradient step on the whole ``[num_steps, num_envs]`` batch.
    ``use_gae=False`` gives PAAC's targets: discounted returns to the end of
    the rollout, bootstrapped from the critic (an "n-step" return with ``n =
    num_steps - t``); ``use_gae=True`` uses GAE(λ) instead. Continuous vs
    discrete actions is inferred from the environment. The defaults are
    PAAC's / the A2C baselines' (16 envs × 5 steps, RMSprop 7e-4).
    """

    HYPERPARAMS = Hyperparams
    RANGES = {
        "learning_rate": POSITIVE,
        "gamma": UNIT,
        "gae_lambda": UNIT,
        "ent_coef": NON_NEGATIVE,
        "vf_coef": NON_NEGATIVE,
        "max_grad_norm": POSITIVE,
        "rmsprop_decay": UNIT,
        "optimizer_eps": POSITIVE,
    }
    POSITIVE_INTS = ("total_timesteps", "num_envs", "num_steps")

    env: str = "CartPole-v1"
    total_timesteps: int = 500_000
    num_envs: int = 16
    num_steps: int = 5
    hidden: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    optimizer: str = "rmsprop"
    use_gae: bool = False
    anneal_lr: bool = True
    #: Standardise observations by running statistics kept in the train state
    #: (``ondevice_rl.normalize``), and scale rewards by the running std of
    #: the discounted return. Off: results identical to before they existed.
    normalize_obs: bool = False
    normalize_rewards: bool = False
    # Defaults of the traced hyperparameters.
    learning_rate: float = 7e-4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    rmsprop_decay: float = 0.99
    optimizer_eps: float = 1e-5

    def validate(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(
                f"A2CConfig.optimizer must be one of {', '.join(OPTIMIZERS)}, "
                f"got {self.optimizer!r}"
            )
