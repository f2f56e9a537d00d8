"""A2C's static configuration and its traced hyperparameters."""

from ondevice_rl.train.kit.config import (
    POSITIVE,
    UNIT,
    ActorCriticConfig,
    RolloutSizes,
    learner_config,
    traced,
)

OPTIMIZERS = ("rmsprop", "adam")


@learner_config
class A2CConfig(RolloutSizes, ActorCriticConfig):
    """Everything that sets a shape or a loop length (static), plus the
    traced hyperparameters' defaults (``config.hyperparams``).

    Each update collects ``num_steps`` steps of ``num_envs`` environments and
    takes one gradient step on the whole ``[num_steps, num_envs]`` batch.
    ``use_gae=False`` gives PAAC's targets: discounted returns to the end of
    the rollout, bootstrapped from the critic (an "n-step" return with ``n =
    num_steps - t``); ``use_gae=True`` uses GAE(λ) instead. Continuous vs
    discrete actions is inferred from the environment. The defaults are
    PAAC's / the A2C baselines' (16 envs × 5 steps, RMSprop 7e-4). ``gae_lambda``
    is read only with ``use_gae``.

    ``normalize_advantages`` standardises the advantages over the ``[T, B]``
    batch before the policy gradient (PAAC and the baselines do not).
    Measured with 8 seeds at 1e6 env steps (GAE, RMSprop 7e-4, 16 envs × 5
    steps): CartPole-v1 reaches 500 on every seed instead of a mean of 485,
    Acrobot-v1 a mean of -82 instead of -93 (one seed at -161). It also makes
    the policy step independent of the rewards' scale.
    """

    num_envs: int = 16
    num_steps: int = 5
    optimizer: str = "rmsprop"
    use_gae: bool = False
    rmsprop_decay: float = traced(0.99, UNIT, "RMSprop's decay (RMSprop only)")
    lr_schedule: str = "linear"
    learning_rate: float = 7e-4
    optimizer_eps: float = traced(1e-5, POSITIVE, "RMSprop's or Adam's ε")

    def validate(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(
                f"A2CConfig.optimizer must be one of {', '.join(OPTIMIZERS)}, "
                f"got {self.optimizer!r}"
            )


Hyperparams = A2CConfig.HYPERPARAMS
