"""Parallelised Q-network (PQN, Gallici et al. 2024) as one fused, vmappable
program: ε-greedy over vmapped envs, Q(λ) returns, a LayerNorm Q-network,
epochs × minibatches per rollout; no replay buffer, no target network."""

from ondevice_rl.train.kit.protocol import Algorithm
from ondevice_rl.train.pqn.config import Hyperparams, PQNConfig
from ondevice_rl.train.pqn.loop import (
    LearnStats,
    Minibatch,
    make_train,
    make_trainer,
    td_loss,
)

ALGORITHM = Algorithm(
    name="pqn",
    summary="parallelised Q-learning (ε-greedy, Q(λ), LayerNorm Q-net, no replay)",
    config=PQNConfig,
    make_trainer=make_trainer,
    continuous_actions=False,
)

__all__ = [
    "ALGORITHM",
    "Hyperparams",
    "LearnStats",
    "Minibatch",
    "PQNConfig",
    "make_train",
    "make_trainer",
    "td_loss",
]
