"""SAC's static configuration and its traced hyperparameters.

The defaults start from rejax's Pendulum settings (one env per seed, one
gradient step per env step, [64, 64] swish networks, a 10,000-transition
buffer, batches of 256, learning from 256 env steps on, τ = 0.02,
observation normalisation) with a learning rate of 3e-3 for the actor,
the critics and the temperature.
"""

from ondevice_rl.ranges import FINITE
from ondevice_rl.train.kit.config import POSITIVE, learner_config, traced
from ondevice_rl.train.kit.off_policy import OffPolicyConfig


@learner_config
class SACConfig(OffPolicyConfig):
    """Soft actor-critic (Haarnoja et al., 2018) for continuous actions.

    Twin Q critics with Polyak-averaged targets (every gradient step), a
    tanh-squashed Gaussian policy scaled to the env's Box, and the
    temperature α learned toward the target entropy ``target_entropy · |A|``
    (−|A| by default) unless ``learn_alpha`` is off (then α stays
    ``alpha``). Each gradient step: the critics on the soft n-step targets,
    then the actor against the updated critics, then α, then the targets.
    The replay, update-to-data ratio, learning starts and n-step fields are
    ``OffPolicyConfig``'s.
    """

    learn_alpha: bool = True
    learning_rate: float = 3e-3
    max_grad_norm: float = 100.0
    alpha: float = traced(1.0, POSITIVE, "entropy temperature α at the start")
    target_entropy: float = traced(
        -1.0, FINITE, "target entropy per action dimension (× |A|)"
    )


Hyperparams = SACConfig.HYPERPARAMS
