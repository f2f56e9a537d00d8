"""A probe that only a policy with memory can solve.

``Probe-Memory-v0`` (``ProbeMemory``): one of ``K`` cues is shown at the
first step (a one-hot ``[K]`` beside a query flag), then ``delay`` steps of
blank observations; at the step whose query flag is set, the action matching
the cue earns +1 and the episode ends. Any other action earns 0. A
feed-forward policy sees the same observation at the query whatever the cue,
so it can do no better than chance, ``1/K``; a policy that remembers the cue
earns 1 per episode.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.env.spaces import Box, Discrete
from ondevice_rl.env.types import Environment


class MemoryParams(NamedTuple):
    max_steps: jax.Array  # never reached: the query ends the episode


class MemoryState(NamedTuple):
    time: jax.Array  # [] int32, steps taken this episode
    cue: jax.Array  # [] int32 in [0, K)


class ProbeMemory(Environment):
    """``K`` cues, the query ``delay`` steps after the cue (``delay ≥ 1``)."""

    name = "Probe-Memory-v0"
    stochastic_step = False  # the cue is drawn at reset

    def __init__(self, num_cues: int = 2, delay: int = 5):
        if num_cues < 2 or delay < 1:
            raise ValueError("ProbeMemory needs num_cues >= 2 and delay >= 1")
        self.num_cues, self.delay = num_cues, delay

    def default_params(self) -> MemoryParams:
        return MemoryParams(max_steps=jnp.int32(self.delay + 2))

    def reset(self, key, params):
        cue = jax.random.randint(key, (), 0, self.num_cues, jnp.int32)
        state = MemoryState(jnp.int32(0), cue)
        return self.observe(state, params), state

    def transition(self, key, state, action, params):
        query = state.time == self.delay
        reward = jnp.where(query & (action == state.cue), 1.0, 0.0)
        return state, reward.astype(jnp.float32), query

    def observe(self, state, params):
        cue = jax.nn.one_hot(state.cue, self.num_cues) * (state.time == 0)
        query = (state.time == self.delay).astype(jnp.float32)
        return jnp.concatenate([cue, query[None]]).astype(jnp.float32)

    def observation_space(self, params):
        return Box(0.0, 1.0, (self.num_cues + 1,), jnp.float32)

    def action_space(self, params):
        return Discrete(self.num_cues)


class ProbeMemoryTruncation(ProbeMemory):
    """``Probe-MemoryTruncation-v0``: the cue ``c`` of two is shown at the
    first step only; every step pays ``c``; episodes are cut by a 5-step time
    limit, never terminated. With truncation bootstrapped from the final
    observation *with the memory of the episode*, ``V = c / (1 − γ)``; a
    learner that evaluates the final observation with a fresh carry cannot
    tell the cues apart there and learns values pulled towards their mean.
    """

    name = "Probe-MemoryTruncation-v0"

    def __init__(self):
        super().__init__(num_cues=2, delay=1)

    def default_params(self) -> MemoryParams:
        return MemoryParams(max_steps=jnp.int32(5))

    def transition(self, key, state, action, params):
        return state, state.cue.astype(jnp.float32), jnp.bool_(False)

    def observe(self, state, params):
        return jax.nn.one_hot(state.cue, 2, dtype=jnp.float32) * (state.time == 0)

    def observation_space(self, params):
        return Box(0.0, 1.0, (2,), jnp.float32)
