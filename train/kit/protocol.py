"""The learner protocol: what every learner gives the runner, sweeps, bench,
evaluation and the CLI, and the registry's record of a learner.

A learner lives in ``train/<name>/`` and exports

* a frozen config built with ``learner_config`` (``train/kit/config.py``):
  fields that set shapes or loop lengths, plus its traced hyperparameters
  declared once with ``traced``;
* ``make_trainer(config) -> Trainer``, the surface below, which generic code
  uses and nothing else;
* ``make_train(config) -> train(key, hyperparams, env_params=None) ->
  TrainOutput`` (``whole_run(make_trainer(config))``);

and one ``Algorithm`` record, listed in ``train/kit/registry.py``.
"""

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ondevice_rl.nn.precision import at_matmul_precision
from ondevice_rl.ranges import Range
from ondevice_rl.scans import stacked_scan
from ondevice_rl.train.kit.env_setup import EnvSetup


class TrainOutput(NamedTuple):
    state: Any
    metrics: dict  # name -> [num_updates] float32 (leading population axes under vmap)


class Trainer(NamedTuple):
    """One learner's program in pieces, all pure; generic code (runner,
    sweeps, evaluation, render, policy loading, bench) uses only these, and
    every learner has each of them.

    Attributes:
        config: the learner's frozen config.
        setup: the wrapped env and its spaces (``EnvSetup``).
        network: the flax module acting and learning (for inspection).
        init: ``(key, hp, env_params=None) -> TrainState``.
        run: ``(state, hp, env_params=None, num_updates=1) -> (state,
            metrics)``, ``num_updates`` (static) updates in one ``lax.scan``;
            ``metrics[name]`` is ``[num_updates]``.
        policy: ``(params, carry, obs [..., *obs_shape], key, deterministic,
            mask=None) -> (env_action [...], carry)``: the trained policy,
            ``params`` from ``policy_params(state)``; ``deterministic`` a
            Python bool; ``mask`` ``[..., A]`` bool marks legal discrete
            actions.
        initial_carry: ``(batch_shape) -> carry``, the policy's carry at an
            episode's start (``()`` for feed-forward policies).
    """

    config: Any
    setup: EnvSetup
    network: Any
    init: Callable
    run: Callable
    policy: Callable
    initial_carry: Callable

    @property
    def env(self) -> Any:
        return self.setup.env

    @property
    def default_env_params(self) -> Any:
        return self.setup.default_params


def no_carry(batch_shape: tuple[int, ...] = ()) -> tuple:
    """The carry of a feed-forward policy: nothing."""
    return ()


def feed_forward_trainer(
    config: Any,
    setup: EnvSetup,
    network: Any,
    init: Callable,
    update: Callable,
    policy: Callable,
) -> Trainer:
    """The ``Trainer`` of a learner whose policy has no carry: ``run`` scans
    ``update(state, hp, env_params) -> (state, metrics)``."""
    return at_config_precision(
        Trainer(config, setup, network, init, scan_updates(update), policy, no_carry)
    )


def at_config_precision(trainer: Trainer) -> Trainer:
    """``trainer`` with ``init``, ``run`` and ``policy`` traced at
    ``config.matmul_precision`` (``ondevice_rl.nn.precision``): every matmul
    of the learner, gradients included, at that precision."""
    precision = trainer.config.matmul_precision

    def at(fn):
        return at_matmul_precision(fn, precision)

    return trainer._replace(
        init=at(trainer.init), run=at(trainer.run), policy=at(trainer.policy)
    )


def scan_updates(update: Callable) -> Callable:
    """``run(state, hp, env_params=None, num_updates=1) -> (state, metrics)``:
    ``num_updates`` (static) calls of ``update(state, hp, env_params)`` in one
    ``lax.scan`` (``stacked_scan``); metrics get a leading ``[num_updates]``
    axis."""

    def run(state, hp, env_params=None, num_updates=1):
        return stacked_scan(
            lambda state: update(state, hp, env_params), state, num_updates
        )

    return run


def whole_run(trainer: Trainer) -> Callable[..., TrainOutput]:
    """``train(key, hyperparams, env_params=None) -> TrainOutput``: ``init``
    then every update of ``trainer.config`` in one ``run``; pure, safe to
    ``jax.jit`` and ``jax.vmap``."""

    def train(key, hyperparams, env_params=None) -> TrainOutput:
        state = trainer.init(key, hyperparams, env_params)
        num_updates = trainer.config.num_updates
        state, metrics = trainer.run(state, hyperparams, env_params, num_updates)
        return TrainOutput(state, metrics)

    return train


@dataclasses.dataclass(frozen=True)
class Algorithm:
    """A registry record: everything generic code needs of one learner."""

    name: str
    summary: str  # one line, for help texts and tables
    config: type  # the frozen config dataclass
    make_trainer: Callable[[Any], Trainer]
    continuous_actions: bool = True  # whether Box action spaces are supported
    discrete_actions: bool = True  # whether Discrete action spaces are supported
    #: ``(config, mesh) -> Trainer`` with the env batch split over the mesh's
    #: devices (``ondevice-rl train --devices``); None: one device only.
    data_parallel: Callable[[Any, Any], Trainer] | None = None

    @property
    def actions(self) -> str:
        """The action spaces it acts in, in words: "discrete, continuous"."""
        kinds = ("discrete",) * self.discrete_actions
        return ", ".join(kinds + ("continuous",) * self.continuous_actions)

    def make_train(self, config: Any) -> Callable[..., TrainOutput]:
        """``train(key, hyperparams, env_params=None) -> TrainOutput``, pure."""
        return whole_run(self.make_trainer(config))

    @property
    def hyperparams(self) -> type:
        """The NamedTuple class of traced hyperparameters."""
        return self.config.HYPERPARAMS

    @property
    def ranges(self) -> Mapping[str, Range]:
        return self.config.RANGES

    @property
    def hyperparam_fields(self) -> tuple[str, ...]:
        return self.config.HYPERPARAMS._fields

    @property
    def static_fields(self) -> tuple[str, ...]:
        """Config fields that set shapes or loop lengths (``env`` excluded)."""
        traced = set(self.hyperparam_fields)
        return tuple(
            f.name
            for f in dataclasses.fields(self.config)
            if f.name not in traced and f.name != "env"
        )

    def defaults(self) -> dict[str, Any]:
        return {f.name: f.default for f in dataclasses.fields(self.config)}
