"""DQN's static configuration and its traced hyperparameters.

The defaults are the reference DQN's settings (the textbook
single-jit DQN kept in the bench): 10 envs; a buffer of 10,000 transitions; batch
128; learning from 10,000 env steps on with one gradient step per vector step
(= per 10 env steps); a hard target copy every 500 env steps; ε-greedy with ε
1.0 → 0.05 linearly over 250,000 env steps; Adam 2.5e-4; γ 0.99; a 120-84
ReLU Q-network; squared TD error. Two deliberate differences: time limits
bootstrap from ``final_obs`` (the reference treats them as terminal), and
gradients are clipped to a global norm of ``max_grad_norm`` (10 by default,
which the squared loss rarely reaches once learning settles; the reference
does not clip — set it very large, e.g. 1e9, to match).
"""

from ondevice_rl.train.kit.config import (
    EpsilonGreedyFields,
    LearnerConfig,
    Range,
    learner_config,
    traced,
)
from ondevice_rl.train.kit.replay import ReplaySizes, check_replay_sizes

LOSSES = ("mse", "huber")


@learner_config
class DQNConfig(EpsilonGreedyFields, ReplaySizes, LearnerConfig):
    """Everything that sets a shape or a loop length (static), plus defaults
    for the traced hyperparameters (``config.hyperparams``).

    One update is ``train_frequency`` vector steps of ``num_envs`` envs (added
    to the buffer), then — once ``learning_starts`` env steps have been taken
    — ``gradient_steps`` gradient steps on batches of ``batch_size`` samples,
    then, whenever the env-step count crosses a multiple of
    ``target_update_every``, a target update ``target ← tau·online + (1 −
    tau)·target``: ``tau = 1`` (the default) is DQN's hard copy every
    ``target_update_every`` env steps; ``tau < 1`` with
    ``target_update_every = num_envs * train_frequency`` is Polyak averaging
    after every update.

    A run of no more than ``learning_starts`` env steps takes no gradient
    step (allowed, for smoke runs of generic code).

    The buffer holds ``buffer_size // num_envs`` vector steps (``buffer_size``
    rounded down to a multiple of ``num_envs``). ``n_step > 1`` learns from
    n-step returns (truncation-aware, no off-policy correction). Only
    discrete action spaces are supported.

    ``loss="huber"`` (δ = 1) diverged on CartPole with the default target
    copies every 500 env steps (Q grew to 1e4-1e6, presumably because with a
    bounded gradient per sample the few terminal transitions no longer hold
    Q down); it stayed bounded with copies every 5,000. The recipes use the
    squared error.
    """

    ZERO_ALLOWED = ("learning_starts",)

    num_envs: int = 10
    buffer_size: int = 10_000  # transitions (env steps) held
    batch_size: int = 128  # samples per gradient step
    learning_starts: int = 10_000  # env steps before the first gradient step
    train_frequency: int = 1  # vector steps per update
    gradient_steps: int = 1  # gradient steps per update
    target_update_every: int = 500  # env steps between target updates
    double_dqn: bool = False  # online argmax, target evaluation
    loss: str = "mse"  # "mse" (squared TD error) or "huber" (δ = 1)
    n_step: int = 1  # rewards per TD target before the bootstrap
    hidden: tuple[int, ...] = (120, 84)
    activation: str = "relu"
    exploration_steps: int = 250_000
    tau: float = traced(
        1.0, Range(0.0, 1.0, low_open=True), "target ← τ·online + (1 − τ)·target"
    )
    max_grad_norm: float = 10.0

    def validate(self) -> None:
        name = type(self).__name__
        if self.loss not in LOSSES:
            raise ValueError(
                f"{name}.loss must be one of {', '.join(LOSSES)}, got {self.loss!r}"
            )
        needed = max(self.n_step, self.train_frequency)
        check_replay_sizes(self, needed, "n_step, train_frequency")

    @property
    def vector_steps(self) -> int:
        """Vector steps per update (``train_frequency``)."""
        return self.train_frequency


Hyperparams = DQNConfig.HYPERPARAMS
