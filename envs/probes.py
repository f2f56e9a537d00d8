"""Probe environments: tiny MDPs whose true values are known in closed form.

In the spirit of bsuite's probes, each isolates one piece of a learner so a
bug shows up as a wrong number rather than as slow learning:

* ``Probe-OneStep-v0`` (``ProbeOneStep``): the value network can fit a
  constant. ``V([1.0]) = 1``.
* ``Probe-TwoStep-v0`` (``ProbeTwoStep``): discounting and bootstrapping
  across a step. ``V([0.0]) = gamma``, ``V([1.0]) = 1``.
* ``Probe-Truncation-v0`` (``ProbeTruncation``): time limits are truncation,
  not termination. ``V([1.0]) = 1 / (1 - gamma)`` under correct bootstrapping
  from ``info["final_obs"]``; a learner that treats the time limit as a
  terminal state sees at most 5 rewards per episode and learns ``V < 5``.

* ``Probe-Box-v0`` (``ProbeBox``): a continuous action that matters. One
  step, reward ``1 − (a − 2)²`` for ``a`` in the Box ``[-1, 3]``: the best
  action is ``a* = 2`` and ``Q(a) = 1 − (a − 2)²``, ``V* = 1``.

* ``Probe-Mask-v0`` (``ProbeMask``): an action mask that matters. See the
  class: the action a learner would pick without the mask is illegal, and a
  bootstrap that ignores it overestimates the first step's value.

The first three have a ``Discrete(2)`` action space that has no effect; all
but the last have a ``[1]`` observation and deterministic dynamics; their
state is just the step count.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.env.masks import ACTION_MASK
from ondevice_rl.env.spaces import Box, Discrete
from ondevice_rl.env.types import Environment

#: Time limit of the probes that end on their own; never reached.
LONG_EPISODE = 1_000_000


class ProbeParams(NamedTuple):
    max_steps: jax.Array


class ProbeState(NamedTuple):
    time: jax.Array  # [] int32, steps taken this episode


class _Probe(Environment):
    """Shared plumbing: the state is the step count, actions are ignored."""

    max_steps: int = LONG_EPISODE

    def default_params(self) -> ProbeParams:
        return ProbeParams(max_steps=jnp.int32(self.max_steps))

    def reset(self, key, params):
        state = ProbeState(jnp.int32(0))
        return self.observe(state, params), state

    def observe(self, state, params):
        return jnp.ones((1,), jnp.float32)

    def observation_space(self, params):
        return Box(0.0, 1.0, (1,), jnp.float32)

    def action_space(self, params):
        return Discrete(2)


class ProbeOneStep(_Probe):
    """Observation ``[1.0]``, any action, reward +1, terminates after 1 step.

    Expected value: ``V([1.0]) = 1`` for any discount. Catches a value head or
    loss that cannot fit a constant target.
    """

    name = "Probe-OneStep-v0"

    def transition(self, key, state, action, params):
        return state, jnp.float32(1.0), jnp.bool_(True)


class ProbeTwoStep(_Probe):
    """Observation ``[0.0]`` then ``[1.0]``; reward 0 then +1; 2 steps.

    Expected values with discount ``gamma``: ``V([0.0]) = gamma`` and
    ``V([1.0]) = 1``. Catches a wrong discount or bootstrapping that crosses
    (or fails to cross) a step.
    """

    name = "Probe-TwoStep-v0"

    def transition(self, key, state, action, params):
        second = state.time >= 1
        reward = jnp.where(second, 1.0, 0.0).astype(jnp.float32)
        return state, reward, second

    def observe(self, state, params):
        # [0.] at the first step, [1.] at the second (and at the terminal one).
        return jnp.minimum(state.time, 1).astype(jnp.float32).reshape(1)


class ProbeTruncation(_Probe):
    """Observation ``[1.0]``, reward +1 every step, never terminates.

    The time limit ``max_steps`` (5) truncates every episode. Since the
    observation is constant, the true value is that of the endless MDP:
    ``V([1.0]) = 1 / (1 - gamma)`` (100 for gamma = 0.99, 10 for gamma = 0.9),
    and a learner that bootstraps from ``info["final_obs"]`` on truncation
    converges to it. A learner that treats truncation as termination regresses
    on returns of at most 5 rewards instead: for gamma = 0.99 it converges to
    about 2.96 (Monte Carlo, GAE lambda = 1) up to 4.81 (TD(0), the fixed point
    ``1 / (1 - 0.8 gamma)``); for gamma = 0.9, 2.63 to 3.57. Note that value
    learning approaches ``1 / (1 - gamma)`` on a time scale of about
    ``1 / (1 - gamma)`` bootstrapping rounds, so a test with few updates
    should use a small gamma (e.g. 0.9) or check ``V > 5``.
    """

    name = "Probe-Truncation-v0"
    max_steps = 5

    def transition(self, key, state, action, params):
        return state, jnp.float32(1.0), jnp.bool_(False)


class ProbeBox(_Probe):
    """Observation ``[1.0]``, an action in the Box ``[-1, 3]``, reward ``1 −
    (a − 2)²``, terminates after 1 step.

    Expected values for any discount: ``Q([1.0], a) = 1 − (a − 2)²``, best
    action ``a* = 2``, ``V*([1.0]) = 1``. ``a*`` lies off the Box's centre
    (1) and inside it, so an actor whose ``[-1, 1]`` output is not mapped
    onto the Box cannot reach it, and one that saturates misses it. Catches
    a critic that cannot fit a function of the action, an actor that does
    not ascend it, and actions scaled wrongly.
    """

    name = "Probe-Box-v0"
    BEST_ACTION = 2.0

    def action_space(self, params):
        return Box(-1.0, 3.0, (1,), jnp.float32)

    def transition(self, key, state, action, params):
        a = jnp.clip(jnp.asarray(action, jnp.float32).reshape(-1)[0], -1.0, 3.0)
        return state, 1.0 - (a - self.BEST_ACTION) ** 2, jnp.bool_(True)


class ProbeMaskState(NamedTuple):
    time: jax.Array  # [] int32, steps taken this episode
    full: jax.Array  # [] bool, the second step allows every action


class ProbeMask(_Probe):
    """Two steps, three actions, an action mask in the observation.

    Step one: ``{"stage": [0.0], "action_mask": all legal}``, reward 0 for
    any action. Step two: ``{"stage": [1.0], ...}`` in one of two states
    drawn at reset with probability ½ each that look the same to the
    network (the mask is not its input): *full*, every action legal,
    rewards ``(2, 1, 0)``; *restricted*, mask ``(False, True, True)``,
    rewards ``(−1, 1, 0)`` (−1 for the illegal action, were it taken). The
    episode then terminates.

    Honouring the mask: the best action in step two is 0 (full) or 1
    (restricted), ``Q([1.0]) = (2, 1, 0)`` (action 0 is only ever taken in
    the full state), and with discount ``γ`` ``V([0.0]) = γ·(½·2 + ½·1) =
    1.5·γ``; the optimal return is 1.5. Ignoring it: the argmax picks the
    illegal 0 in the restricted state (return ½·2 − ½·1 = 0.5), and a
    bootstrap over every action's value gives ``V([0.0]) = 2·γ``.
    """

    name = "Probe-Mask-v0"
    #: Rewards of the second step, ``[full?][action]``.
    REWARDS = ((-1.0, 1.0, 0.0), (2.0, 1.0, 0.0))
    OPTIMAL_RETURN = 1.5

    def reset(self, key, params):
        state = ProbeMaskState(jnp.int32(0), jax.random.bernoulli(key))
        return self.observe(state, params), state

    def transition(self, key, state, action, params):
        rewards = jnp.asarray(self.REWARDS, jnp.float32)[state.full.astype(jnp.int32)]
        second = state.time >= 1
        reward = jnp.where(second, rewards[action], 0.0).astype(jnp.float32)
        return state, reward, second

    def observe(self, state, params):
        second = state.time >= 1
        mask = jnp.array([True, True, True]).at[0].set(state.full | ~second)
        return {"stage": second.astype(jnp.float32).reshape(1), ACTION_MASK: mask}

    def observation_space(self, params):
        return {
            "stage": Box(0.0, 1.0, (1,), jnp.float32),
            ACTION_MASK: Box(0, 1, (3,), jnp.bool_),
        }

    def action_space(self, params):
        return Discrete(3)
