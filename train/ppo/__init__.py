"""Proximal policy optimisation as one fused, vmappable program."""

from ondevice_rl.train.kit.algorithm import Algorithm
from ondevice_rl.train.ppo.config import HYPERPARAM_FIELDS, Hyperparams, PPOConfig
from ondevice_rl.train.ppo.loop import (
    METRIC_NAMES,
    ActorExtras,
    Trainer,
    TrainOutput,
    TrainState,
    make_train,
    make_trainer,
)
from ondevice_rl.train.ppo.loss import LossStats, Minibatch, ppo_loss

ALGORITHM = Algorithm(
    name="ppo",
    summary="proximal policy optimisation: clipped surrogate, GAE, "
    "epochs x minibatches",
    config=PPOConfig,
    make_trainer=make_trainer,
    make_train=make_train,
    host_loop=True,
)

__all__ = [
    "ALGORITHM",
    "ActorExtras",
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
