"""Soft actor-critic with its replay buffer in device memory, one fused
program."""

from ondevice_rl.train.kit.protocol import Algorithm
from ondevice_rl.train.sac.config import Hyperparams, SACConfig
from ondevice_rl.train.sac.loop import make_train, make_trainer
from ondevice_rl.train.sac.loss import SACStats, actor_loss, soft_targets

ALGORITHM = Algorithm(
    name="sac",
    summary="soft actor-critic (twin critics, learned temperature, squashed "
    "Gaussian; replay buffer on device, UTD ratio, n-step option)",
    config=SACConfig,
    make_trainer=make_trainer,
    discrete_actions=False,
)

__all__ = [
    "ALGORITHM",
    "Hyperparams",
    "SACConfig",
    "SACStats",
    "actor_loss",
    "make_train",
    "make_trainer",
    "soft_targets",
]
