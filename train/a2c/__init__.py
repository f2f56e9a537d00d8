"""Synchronous advantage actor-critic (PAAC's design) as one fused program."""

from ondevice_rl.train.a2c.config import A2CConfig, Hyperparams
from ondevice_rl.train.a2c.loop import (
    ActorExtras,
    make_learner,
    make_train,
    make_trainer,
)
from ondevice_rl.train.a2c.loss import Batch, LossStats, a2c_loss
from ondevice_rl.train.kit.protocol import Algorithm

ALGORITHM = Algorithm(
    name="a2c",
    summary="synchronous advantage actor-critic (PAAC: n-step returns or GAE, "
    "one step per rollout)",
    config=A2CConfig,
    make_trainer=make_trainer,
)

__all__ = [
    "ALGORITHM",
    "A2CConfig",
    "ActorExtras",
    "Batch",
    "Hyperparams",
    "LossStats",
    "a2c_loss",
    "make_learner",
    "make_train",
    "make_trainer",
]
