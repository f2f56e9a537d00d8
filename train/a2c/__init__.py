"""Synchronous advantage actor-critic (A2C / PAAC) as one fused, vmappable program."""

from ondevice_rl.train.a2c.config import HYPERPARAM_FIELDS, A2CConfig, Hyperparams
from ondevice_rl.train.a2c.loop import (
    METRIC_NAMES,
    ActorExtras,
    Trainer,
    TrainState,
    make_train,
    make_trainer,
)
from ondevice_rl.train.a2c.loss import Batch, LossStats, a2c_loss
from ondevice_rl.train.kit.algorithm import Algorithm, TrainOutput

ALGORITHM = Algorithm(
    name="a2c",
    summary="synchronous advantage actor-critic (PAAC: n-step returns or GAE, "
    "one step per rollout)",
    config=A2CConfig,
    make_trainer=make_trainer,
    make_train=make_train,
    host_loop=True,
)

__all__ = [
    "ALGORITHM",
    "A2CConfig",
    "ActorExtras",
    "Batch",
    "HYPERPARAM_FIELDS",
    "Hyperparams",
    "LossStats",
    "METRIC_NAMES",
    "Trainer",
    "TrainOutput",
    "TrainState",
    "a2c_loss",
    "make_train",
    "make_trainer",
]
