"""Proximal policy optimisation as one fused, vmappable program."""

from ondevice_rl.train.ppo.config import HYPERPARAM_FIELDS, Hyperparams, PPOConfig
from ondevice_rl.train.ppo.loop import (
    METRIC_NAMES,
    Trainer,
    TrainOutput,
    TrainState,
    make_train,
    make_trainer,
)
from ondevice_rl.train.ppo.loss import LossStats, Minibatch, ppo_loss

__all__ = [
    "HYPERPARAM_FIELDS",
    "METRIC_NAMES",
    "Hyperparams",
    "LossStats",
    "Minibatch",
    "PPOConfig",
    "Trainer",
    "TrainOutput",
    "TrainState",
    "make_train",
    "make_trainer",
    "ppo_loss",
]
