"""The train state every learner carries, built the same way for all.

``TrainState`` holds the fields every learner has; what is a learner's own
(DQN's target network and replay buffer) goes in ``extra``. Arrays only, so
it scans, vmaps over seeds, shards and checkpoints as one pytree.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.cpu.flat_params import ravel_params
from ondevice_rl.metrics import EpisodeTracker, episode_metrics
from ondevice_rl.normalize import Normalizer, init_normalizer
from ondevice_rl.rollout import RolloutState, batch_reset
from ondevice_rl.train.kit.env_setup import EnvSetup


class TrainState(NamedTuple):
    """Everything a learner's loop carries; arrays only.

    ``opt_state`` is over the parameters raveled into one vector (see
    ``ondevice_rl/cpu/flat_params.py``). ``normalizer`` holds running obs/reward
    statistics, ``Normalizer((), ())`` (no leaves) when both are off.
    """

    params: Any
    opt_state: Any
    rollout: RolloutState  # B envs' states, last obs and the run's key
    update_step: jax.Array  # [] int32, updates done so far
    episodes: EpisodeTracker
    normalizer: Normalizer = Normalizer((), ())
    extra: Any = ()  # the learner's own fields


class PolicyParams(NamedTuple):
    """What acting needs of a train state."""

    network: Any  # the network's parameters
    normalizer: Any = None  # the state's obs statistics (``Normalizer``), if any


def policy_params(state: TrainState) -> PolicyParams:
    """``PolicyParams`` of a learner's train state."""
    return PolicyParams(state.params, state.normalizer)


def initial_state(
    key: jax.Array,
    env_params: Any,
    setup: EnvSetup,
    init_params: Callable[[jax.Array], Any],
    config: Any,
    init_opt_state: Callable[[jax.Array], Any],
    extra: Callable[[Any], Any] = lambda params: (),
) -> TrainState:
    """A fresh ``TrainState``: ``init_params(key)``, ``config.num_envs`` reset envs,
    the optimiser state ``init_opt_state(flat_params)``, empty episode stats,
    a normaliser if the config asks for one, and ``extra(params)``."""
    env_params = setup.default_params if env_params is None else env_params
    net_key, env_key, key = jax.random.split(key, 3)
    params = init_params(net_key)
    rollout_state = batch_reset(setup.env, env_params, env_key, config.num_envs)
    normalizer = init_normalizer(
        setup.obs_spec,
        config.num_envs,
        getattr(config, "normalize_obs", False),
        getattr(config, "normalize_rewards", False),
    )
    return TrainState(
        params=params,
        opt_state=init_opt_state(ravel_params(params)[0]),
        rollout=rollout_state._replace(key=key),
        update_step=jnp.int32(0),
        episodes=EpisodeTracker.create(),
        normalizer=normalizer,
        extra=extra(params),
    )


def advanced(
    state: TrainState,
    rollout_state: RolloutState,
    key: jax.Array,
    episodes: Any,
    axis_name: str | None = None,
    **changes: Any,
) -> tuple[TrainState, dict]:
    """The state after one update, and the update's episode metrics: the
    new rollout state (its key now ``key``), one more update counted, the
    episode tracker fed the rollout's ``episodes`` (``[T, B]`` ends), and
    the learner's ``changes`` (params, optimiser state, ...)."""
    tracker, metrics = episode_metrics(
        episodes, rollout_state.env_state, state.episodes, axis_name
    )
    state = state._replace(
        rollout=rollout_state._replace(key=key),
        update_step=state.update_step + 1,
        episodes=tracker,
        **changes,
    )
    return state, metrics
