"""Deep Q-learning with its replay buffer in device memory, one fused program."""

from ondevice_rl.train.dqn.config import DQNConfig, Hyperparams
from ondevice_rl.train.dqn.loop import Extra, make_train, make_trainer
from ondevice_rl.train.dqn.loss import LossStats, bootstrap_values, td_loss, td_targets
from ondevice_rl.train.kit.protocol import Algorithm

ALGORITHM = Algorithm(
    name="dqn",
    summary="deep Q-learning (ε-greedy, replay buffer on device, target net, "
    "double/n-step options)",
    config=DQNConfig,
    make_trainer=make_trainer,
    continuous_actions=False,
)

__all__ = [
    "ALGORITHM",
    "DQNConfig",
    "Extra",
    "Hyperparams",
    "LossStats",
    "bootstrap_values",
    "make_train",
    "make_trainer",
    "td_loss",
    "td_targets",
]
