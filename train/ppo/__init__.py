"""Proximal policy optimisation as one fused, vmappable program."""

from ondevice_rl.train.kit.protocol import Algorithm
from ondevice_rl.train.ppo.config import Hyperparams, PPOConfig
from ondevice_rl.train.ppo.data_parallel import make_trainer_dp
from ondevice_rl.train.ppo.loop import (
    ActorExtras,
    make_learner,
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
    data_parallel=make_trainer_dp,
)

__all__ = [
    "ALGORITHM",
    "ActorExtras",
    "Hyperparams",
    "LossStats",
    "Minibatch",
    "PPOConfig",
    "make_learner",
    "make_train",
    "make_trainer",
    "ppo_loss",
]
