"""What the off-policy actor-critics (SAC, TD3) share, apart from their
trainer (``train/kit/off_policy_trainer.py``): the config fields of replay,
learning starts, update-to-data ratio, n-step returns and target networks;
the parameters a gradient step reads and changes; the twin critics' TD
loss; and the window of last finished episodes their final return is read
from.
"""

import dataclasses
import math
from fractions import Fraction
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.metrics import FINAL_WINDOW
from ondevice_rl.returns import n_step_returns
from ondevice_rl.rollout import EpisodeInfo, Transition
from ondevice_rl.train.kit.config import LearnerConfig, Range, traced
from ondevice_rl.train.kit.replay import ReplaySizes, check_replay_sizes

#: Largest number of vector steps one update may take to realise a
#: fractional update-to-data ratio (``utd_ratio · num_envs = g / k``).
MAX_VECTOR_STEPS = 1000


def replay_shape(utd_ratio: float, num_envs: int) -> tuple[int, int]:
    """``(vector steps, gradient steps)`` of one update for ``utd_ratio``
    gradient steps per env step over ``num_envs`` envs: the smallest ``k``,
    ``g`` with ``g / k = utd_ratio · num_envs``. ValueError (one line) when
    that ratio is no fraction with a denominator up to ``MAX_VECTOR_STEPS``.
    """
    per_vector_step = utd_ratio * num_envs
    ratio = Fraction(per_vector_step).limit_denominator(MAX_VECTOR_STEPS)
    if ratio <= 0 or not math.isclose(ratio, per_vector_step, rel_tol=1e-9):
        raise ValueError(
            f"utd_ratio={utd_ratio} × num_envs={num_envs} gradient steps per "
            f"vector step is not a fraction g/k with k <= {MAX_VECTOR_STEPS}"
        )
    return ratio.denominator, ratio.numerator


@dataclasses.dataclass(frozen=True)
class OffPolicyConfig(ReplaySizes, LearnerConfig):
    """Fields of the off-policy actor-critics for continuous actions.

    One update takes ``k`` vector steps of ``num_envs`` envs (stored, raw
    observations, in the replay buffer) then ``g`` gradient steps, each on
    ``batch_size`` sampled sequences of ``n_step`` steps, where ``g / k =
    utd_ratio · num_envs`` in lowest terms (``utd_ratio``: gradient steps per
    env step, summed over the envs; fractional allowed: 0.25 with one env is
    one gradient step every 4 env steps). Until ``learning_starts`` env steps
    have been taken, actions are uniform in the Box and no gradient step is
    taken. With ``normalize_obs`` the running statistics of the observations
    acted in standardise, at sampling, the stored observations (the current
    statistics, not those of the time they were stored).

    The buffer holds ``buffer_size // num_envs`` vector steps.
    """

    ZERO_ALLOWED = ("learning_starts",)

    env: str = "Pendulum-v1"
    num_envs: int = 1
    hidden: tuple[int, ...] = (64, 64)
    activation: str = "swish"
    buffer_size: int = 10_000  # transitions (env steps) held
    batch_size: int = 256  # sampled sequences per gradient step
    learning_starts: int = 256  # env steps of uniform actions, no learning
    utd_ratio: float = 1.0  # gradient steps per env step (static)
    n_step: int = 1  # rewards per TD target before the bootstrap
    normalize_obs: bool = True
    tau: float = traced(
        0.02, Range(0.0, 1.0, low_open=True), "target ← τ·online + (1 − τ)·target"
    )

    def validate(self) -> None:
        name = type(self).__name__
        ratio = self.utd_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, int | float):
            raise ValueError(f"{name}.utd_ratio must be a number, got {ratio!r}")
        if not (math.isfinite(ratio) and ratio > 0):
            raise ValueError(f"{name}.utd_ratio must be positive, got {ratio!r}")
        try:
            vector_steps, _ = replay_shape(ratio, self.num_envs)
        except ValueError as e:
            raise ValueError(f"{name}: {e}") from None
        needed = max(self.n_step, vector_steps)
        check_replay_sizes(self, needed, "n_step, vector steps per update")

    @property
    def vector_steps(self) -> int:
        """Vector steps per update (``k``)."""
        return replay_shape(self.utd_ratio, self.num_envs)[0]

    @property
    def gradient_steps(self) -> int:
        """Gradient steps per update once learning has started (``g``)."""
        return replay_shape(self.utd_ratio, self.num_envs)[1]


class Model(NamedTuple):
    """What one gradient step reads and changes, each network's parameters
    raveled into one vector (``[P]``)."""

    actor: jax.Array
    critic: jax.Array  # the twin critics'
    target_critic: jax.Array
    own: jax.Array  # the learner's own (SAC: log α [1]; TD3: the target actor)
    opt_state: Any  # the learner's optimiser states
    step: jax.Array  # [] int32, gradient steps taken before this one


class Nets(NamedTuple):
    """The networks applied to raveled parameters."""

    actor: Any  # (flat, obs [..., *obs_shape]) -> the actor's output
    critic: Any  # (flat, obs, unit action [..., A]) -> Q [..., 2]


def n_step_targets(
    seq: Transition, next_values: jax.Array, gamma: jax.Array, n_step: int
) -> jax.Array:
    """TD targets ``[M]`` of the first step of ``[n_step, M]`` sequences,
    bootstrapped from ``next_values [n_step, M]`` (the value of each step's
    ``final_obs``) where a sequence ends or is truncated, not where it
    terminates (``ondevice_rl.returns.n_step_returns``)."""
    returns = n_step_returns(
        seq.reward, next_values, seq.terminated, seq.truncated, gamma, n_step
    )
    return returns[0]


def first_step(tree: Any) -> Any:
    """Step 0 of ``[n_step, M, ...]`` leaves: ``[M, ...]``."""
    return jax.tree.map(lambda x: x[0], tree)


class CriticStats(NamedTuple):
    critic_loss: jax.Array
    q_mean: jax.Array  # mean of the critics' values of the sampled pairs


def critic_loss(
    critic: Any, flat: jax.Array, obs: jax.Array, action: jax.Array, targets: Any
) -> tuple[jax.Array, CriticStats]:
    """``½ Σ_i mean (Q_i(obs, action) − targets)²`` over the twin critics.

    Args:
        critic: ``Nets.critic``; obs ``[M, *obs_shape]``, action ``[M, A]``,
            targets ``[M]`` (held fixed).
    """
    q = critic(flat, obs, action)  # [M, 2]
    error = q - jax.lax.stop_gradient(targets)[:, None]
    loss = 0.5 * jnp.sum(jnp.mean(error**2, axis=0))
    return loss, CriticStats(loss, jax.lax.stop_gradient(q.mean()))


class RecentReturns(NamedTuple):
    """The returns of the last ``window`` finished episodes, a ring."""

    returns: jax.Array  # [window] float32; slot (count + i) % window next
    count: jax.Array  # [] int32, episodes finished so far

    @classmethod
    def create(cls, window: int = FINAL_WINDOW) -> "RecentReturns":
        return cls(jnp.zeros((window,), jnp.float32), jnp.int32(0))

    def add(self, episodes: EpisodeInfo) -> "RecentReturns":
        """Takes in the episodes that ended in ``[T, B]`` steps (time-major:
        the latest last)."""
        window = self.returns.shape[0]
        done = episodes.done.reshape(-1)
        order = jnp.cumsum(done) - 1  # [N] rank among the finished ones
        finished = order[-1] + 1
        keep = done & (order >= finished - window)  # the latest `window`
        slot = jnp.where(keep, (self.count + order) % window, window)
        returns = self.returns.at[slot].set(
            episodes.returns.reshape(-1).astype(jnp.float32), mode="drop"
        )
        return RecentReturns(returns, self.count + finished.astype(jnp.int32))

    def mean(self) -> jax.Array:
        """``[]`` mean return of the episodes held (NaN if none)."""
        window = self.returns.shape[0]
        held = jnp.minimum(self.count, window)
        total = jnp.sum(jnp.where(jnp.arange(window) < held, self.returns, 0.0))
        return jnp.where(held > 0, total / jnp.maximum(held, 1), jnp.nan)
