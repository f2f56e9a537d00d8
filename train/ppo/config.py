"""PPO's static configuration and its traced hyperparameters."""

import dataclasses
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp


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

    @classmethod
    def create(cls, **values: float) -> "Hyperparams":
        """Builds float32 leaves from Python numbers (missing fields raise)."""
        return cls(**{k: jnp.float32(v) for k, v in values.items()})


HYPERPARAM_FIELDS = Hyperparams._fields


@dataclass(frozen=True)
class PPOConfig:
    """Everything that sets a shape or a loop length (static), plus defaults
    for the traced hyperparameters (``config.hyperparams``).

    Continuous vs discrete actions is inferred from the environment.
    """

    env: str = "CartPole-v1"
    total_timesteps: int = 500_000
    num_envs: int = 4
    num_steps: int = 128
    update_epochs: int = 4
    num_minibatches: int = 4
    hidden: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    anneal_lr: bool = True
    # Defaults of the traced hyperparameters.
    learning_rate: float = 2.5e-4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5

    def __post_init__(self):
        positive = (
            "total_timesteps",
            "num_envs",
            "num_steps",
            "update_epochs",
            "num_minibatches",
        )
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(
                    f"PPOConfig.{name} must be a positive int, got {value!r}"
                )
        if self.batch_size % self.num_minibatches:
            raise ValueError(
                f"num_envs * num_steps = {self.batch_size} is not divisible by "
                f"num_minibatches = {self.num_minibatches}"
            )
        if self.num_updates < 1:
            raise ValueError(
                f"total_timesteps={self.total_timesteps} is less than one rollout "
                f"(num_envs * num_steps = {self.batch_size})"
            )
        object.__setattr__(self, "hidden", tuple(self.hidden))

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def minibatch_size(self) -> int:
        return self.batch_size // self.num_minibatches

    @property
    def num_updates(self) -> int:
        return self.total_timesteps // self.batch_size

    @property
    def hyperparams(self) -> Hyperparams:
        return Hyperparams.create(
            **{name: getattr(self, name) for name in HYPERPARAM_FIELDS}
        )

    def replace(self, **changes) -> "PPOConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)
