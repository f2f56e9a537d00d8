"""PQN's static configuration and its traced hyperparameters."""

from ondevice_rl.train.kit.config import (
    UNIT,
    EpsilonGreedyFields,
    OnPolicyConfig,
    RolloutSizes,
    learner_config,
    traced,
)


@learner_config
class PQNConfig(RolloutSizes, EpsilonGreedyFields, OnPolicyConfig):
    """Everything that sets a shape or a loop length (static), plus the
    traced hyperparameters' defaults (``config.hyperparams``).

    ε falls linearly from ``eps_start`` to ``eps_end`` over the first
    ``exploration_steps`` env steps (DQN's unit), then stays at ``eps_end``;
    it changes once per update, at the update's first env step. Discrete
    action spaces only.
    """

    num_envs: int = 64
    num_steps: int = 16
    update_epochs: int = 4
    num_minibatches: int = 8
    hidden: tuple[int, ...] = (128, 128)
    activation: str = "relu"
    q_lambda: float = traced(0.65, UNIT, "λ of the Q(λ) returns")
    layer_norm: bool = True
    lr_schedule: str = "linear"
    learning_rate: float = 5e-4
    max_grad_norm: float = 10.0

    def validate(self) -> None:
        self.check_minibatches()


Hyperparams = PQNConfig.HYPERPARAMS
