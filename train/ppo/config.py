"""PPO's static configuration and its traced hyperparameters."""

from dataclasses import dataclass
from typing import NamedTuple

import jax

from ondevice_rl.train.kit.algorithm import (
    NON_NEGATIVE,
    POSITIVE,
    UNIT,
    AlgorithmConfig,
    MinibatchSizes,
)


class Hyperparams(NamedTuple):
    """Scalar coefficients, traced float32 leaves: sweeping them never recompiles.

    Leaves may carry a leading population axis ``[P]`` under ``jax.vmap``.
    """

    learning_rate: jax.Array
    gamma: jax.Array
    gae_lambda: jax.Array
    clip_eps: jax.Array
    ent_coef: jax.Array
    vf_coef: jax.Array
    max_grad_norm: jax.Array


HYPERPARAM_FIELDS = Hyperparams._fields


@dataclass(frozen=True)
class PPOConfig(MinibatchSizes, AlgorithmConfig):
    """Everything that sets a shape or a loop length (static), plus defaults
    for the traced hyperparameters (``config.hyperparams``).

    Continuous vs discrete actions is inferred from the environment.
    """

    HYPERPARAMS = Hyperparams
    RANGES = {
        "learning_rate": POSITIVE,
        "gamma": UNIT,
        "gae_lambda": UNIT,
        "clip_eps": POSITIVE,
        "ent_coef": NON_NEGATIVE,
        "vf_coef": NON_NEGATIVE,
        "max_grad_norm": POSITIVE,
    }
    POSITIVE_INTS = (
        "total_timesteps",
        "num_envs",
        "num_steps",
        "update_epochs",
        "num_minibatches",
    )

    env: str = "CartPole-v1"
    total_timesteps: int = 500_000
    num_envs: int = 4
    num_steps: int = 128
    update_epochs: int = 4
    num_minibatches: int = 4
    hidden: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    anneal_lr: bool = True
    #: Standardise observations by running statistics kept in the train state
    #: (``ondevice_rl.normalize``), and scale rewards by the running std of
    #: the discounted return. Off: results identical to before they existed.
    normalize_obs: bool = False
    normalize_rewards: bool = False
    # Defaults of the traced hyperparameters.
    learning_rate: float = 2.5e-4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5

    def validate(self) -> None:
        self.check_minibatches()
