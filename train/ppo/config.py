"""PPO's static configuration and its traced hyperparameters."""

from ondevice_rl.train.kit.config import (
    POSITIVE,
    ActorCriticConfig,
    RolloutSizes,
    learner_config,
    traced,
)


@learner_config
class PPOConfig(RolloutSizes, ActorCriticConfig):
    """Everything that sets a shape or a loop length (static), plus the
    traced hyperparameters' defaults (``config.hyperparams``); the fields
    every learner or every actor-critic has are the kit's
    (``train/kit/config.py``). Continuous vs discrete actions is inferred
    from the environment. The defaults are CleanRL's CartPole settings.
    """

    update_epochs: int = 4
    num_minibatches: int = 4
    lr_schedule: str = "linear"
    clip_eps: float = traced(0.2, POSITIVE, "policy ratio clip")

    def validate(self) -> None:
        self.check_minibatches()


Hyperparams = PPOConfig.HYPERPARAMS
