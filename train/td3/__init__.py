"""TD3 with its replay buffer in device memory, one fused program."""

from ondevice_rl.train.kit.protocol import Algorithm
from ondevice_rl.train.td3.config import Hyperparams, TD3Config
from ondevice_rl.train.td3.loop import make_train, make_trainer
from ondevice_rl.train.td3.loss import TD3Stats, actor_loss, smoothed_targets

ALGORITHM = Algorithm(
    name="td3",
    summary="twin delayed DDPG (target smoothing, delayed actor; replay buffer "
    "on device, UTD ratio, n-step option)",
    config=TD3Config,
    make_trainer=make_trainer,
    discrete_actions=False,
)

__all__ = [
    "ALGORITHM",
    "Hyperparams",
    "TD3Config",
    "TD3Stats",
    "actor_loss",
    "make_train",
    "make_trainer",
    "smoothed_targets",
]
