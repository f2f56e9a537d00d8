"""PQN's static configuration and its traced hyperparameters."""

from dataclasses import dataclass
from typing import NamedTuple

import jax

from ondevice_rl.train.kit.algorithm import (
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
    q_lambda: jax.Array  # λ of the Q(λ) returns
    eps_start: jax.Array  # ε-greedy exploration at the first update
    eps_end: jax.Array  # ... and once the linear schedule has run out
    max_grad_norm: jax.Array


HYPERPARAM_FIELDS = Hyperparams._fields


@dataclass(frozen=True)
class PQNConfig(MinibatchSizes, AlgorithmConfig):
    """Everything that sets a shape or a loop length (static), plus defaults
    for the traced hyperparameters (``config.hyperparams``).

    ε falls linearly from ``eps_start`` to ``eps_end`` over the first
    ``exploration_fraction`` of the updates (``exploration_updates``), then
    stays at ``eps_end``. Discrete action spaces only.
    """

    HYPERPARAMS = Hyperparams
    RANGES = {
        "learning_rate": POSITIVE,
        "gamma": UNIT,
        "q_lambda": UNIT,
        "eps_start": UNIT,
        "eps_end": UNIT,
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
    num_envs: int = 64
    num_steps: int = 16
    update_epochs: int = 4
    num_minibatches: int = 8
    hidden: tuple[int, ...] = (128, 128)
    activation: str = "relu"
    layer_norm: bool = True
    exploration_fraction: float = 0.2
    anneal_lr: bool = True
    # Defaults of the traced hyperparameters.
    learning_rate: float = 5e-4
    gamma: float = 0.99
    q_lambda: float = 0.65
    eps_start: float = 1.0
    eps_end: float = 0.05
    max_grad_norm: float = 10.0

    def validate(self) -> None:
        if not 0.0 < self.exploration_fraction <= 1.0:
            raise ValueError(
                f"PQNConfig.exploration_fraction={self.exploration_fraction!r} "
                "is outside (0, 1]"
            )
        self.check_minibatches()

    @property
    def exploration_updates(self) -> int:
        """Updates over which ε anneals (≥ 1)."""
        return max(1, round(self.exploration_fraction * self.num_updates))
