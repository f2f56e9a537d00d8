"""TD3's static configuration and its traced hyperparameters.

The defaults start from rejax's Pendulum settings (one env per seed, one
gradient step per env step, [64, 64] swish networks, a 10,000-transition
buffer, the actor and the targets updated every second gradient step,
observation normalisation) with batches of 256, learning from 256 env
steps on, τ = 0.02, Adam 1e-3 and the noise scales of the TD3 paper.
"""

from ondevice_rl.train.kit.config import NON_NEGATIVE, learner_config, traced
from ondevice_rl.train.kit.off_policy import OffPolicyConfig


@learner_config
class TD3Config(OffPolicyConfig):
    """Twin delayed DDPG (Fujimoto et al., 2018) for continuous actions.

    Twin Q critics learn every gradient step on targets from the target
    actor's action plus clipped Gaussian noise (target policy smoothing);
    every ``policy_delay``-th step the deterministic actor ascends the first
    critic and the target actor and critics move toward the online ones by
    τ. Collecting, the actor's action gets Gaussian noise
    (``exploration_noise``). Noise scales are in half-widths of the Box
    (the actor acts in ``[-1, 1]^A``): 0.1 is a tenth of the way from the
    centre to a bound. The replay, update-to-data ratio, learning starts
    and n-step fields are ``OffPolicyConfig``'s.
    """

    policy_delay: int = 2  # gradient steps per actor and target update
    learning_rate: float = 1e-3
    max_grad_norm: float = 100.0
    exploration_noise: float = traced(
        0.1, NON_NEGATIVE, "std of the Gaussian added to actions while collecting"
    )
    target_noise: float = traced(
        0.2, NON_NEGATIVE, "std of the Gaussian added to the target actor's action"
    )
    target_noise_clip: float = traced(
        0.5, NON_NEGATIVE, "bound of that target-action noise"
    )


Hyperparams = TD3Config.HYPERPARAMS
