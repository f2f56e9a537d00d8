"""Parallelised Q-network (PQN, Gallici et al. 2024) as one fused, vmappable
program: ε-greedy over vmapped envs, Q(λ) returns, a LayerNorm Q-network,
epochs × minibatches per rollout; no replay buffer, no target network."""

from ondevice_rl.train.kit.algorithm import Algorithm
from ondevice_rl.train.pqn.config import HYPERPARAM_FIELDS, Hyperparams, PQNConfig
from ondevice_rl.train.pqn.loop import (
    METRIC_NAMES,
    LearnStats,
    Minibatch,
    Trainer,
    TrainOutput,
    TrainState,
    make_train,
    make_trainer,
    td_loss,
)

ALGORITHM = Algorithm(
    name="pqn",
    summary="parallelised Q-learning (ε-greedy, Q(λ), LayerNorm Q-net, no replay)",
    config=PQNConfig,
    make_trainer=make_trainer,
    make_train=make_train,
    continuous_actions=False,
)

__all__ = [
    "ALGORITHM",
    "HYPERPARAM_FIELDS",
    "METRIC_NAMES",
    "Hyperparams",
    "LearnStats",
    "Minibatch",
    "PQNConfig",
    "Trainer",
    "TrainOutput",
    "TrainState",
    "make_train",
    "make_trainer",
    "td_loss",
]
