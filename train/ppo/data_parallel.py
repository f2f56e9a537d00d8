"""Data-parallel PPO: one run's environments split over devices, gradients
averaged with ``lax.pmean`` inside ``jax.shard_map``.

With ``D`` devices on a 1-D mesh (axis ``"data"``) every device steps
``num_envs / D`` environments, computes GAE on its own ``[T, B/D]`` rollout,
shuffles it into ``num_minibatches`` local minibatches of
``minibatch_size / D`` samples, and at each minibatch step averages its
gradient with the other devices' (``pmean``) before one identical optimiser
step everywhere; params and optimiser state stay replicated. Metrics are
averaged over devices (episode statistics over all finished episodes).

This equals the single-device PPO of ``train.ppo.loop`` except that
advantages are normalised per device minibatch rather than over the global
minibatch (``ppo_loss`` normalises what it is given); with one device it *is*
that program (same keys, same numbers). The same code spans hosts: with
``ondevice_rl.devices.distributed`` initialised, the mesh holds every process's
devices.

``make_trainer_dp`` gives the program as a ``Trainer``
(``train/kit/protocol.py``): ``init`` places the state on the mesh, ``run``
runs updates inside ``shard_map``, so the segmented runner runs, checkpoints
and resumes it as any learner (``ondevice-rl train --devices N``).
``make_train_dp`` is its whole run as one function.

Device ``d``'s environment randomness comes from ``fold_in(key, d)`` (device 0
keeps ``key``), so results depend on the device count.
"""

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ondevice_rl.devices.sharding import DATA_AXIS, make_mesh, mesh_size
from ondevice_rl.train.kit.protocol import Trainer, TrainOutput, whole_run
from ondevice_rl.train.kit.state import TrainState
from ondevice_rl.train.ppo.config import Hyperparams, PPOConfig
from ondevice_rl.train.ppo.loop import make_trainer


def check_divisible(config: PPOConfig, num_devices: int) -> None:
    """Raises ValueError unless the batch splits evenly over the devices."""
    if config.num_envs % num_devices:
        raise ValueError(
            f"num_envs={config.num_envs} is not divisible by {num_devices} devices"
        )
    local_batch = config.batch_size // num_devices
    if local_batch % config.num_minibatches:
        raise ValueError(
            f"per-device batch {local_batch} is not divisible by "
            f"num_minibatches={config.num_minibatches}"
        )


def device_keys(key: jax.Array, num_devices: int) -> jax.Array:
    """``[D]`` keys: ``key`` for device 0, ``fold_in(key, d)`` for the others."""
    keys = [key] + [jax.random.fold_in(key, d) for d in range(1, num_devices)]
    return jnp.stack(keys)


def state_specs(axis_name: str = DATA_AXIS) -> TrainState:
    """How a data-parallel ``TrainState`` lies on the mesh: the rollout (env
    states ``[B, ...]``, the ``[D]`` keys) split over ``axis_name``, every
    other field replicated."""
    replicated = TrainState(*[P()] * len(TrainState._fields))
    return replicated._replace(rollout=P(axis_name))


def make_trainer_dp(
    config: PPOConfig, mesh: Mesh | None = None, axis_name: str = DATA_AXIS
) -> Trainer:
    """PPO's ``Trainer`` over ``mesh`` (a 1-D mesh named ``axis_name``;
    default: every device), ValueError (one line) for a batch that does not
    split over its devices or a config it cannot run (obs or reward
    normalisation, memory).

    ``init(key, hp, env_params=None)`` gives the state placed on the mesh
    (``state_specs``: ``rollout.key`` is ``[D]`` keys); ``run(state, hp,
    env_params=None, num_updates=1)`` runs the updates on every device's
    share; ``metrics[name]`` is ``[num_updates]`` as in ``make_trainer``.
    Acting (``policy``) is the single-device learner's: params are
    replicated.
    """
    mesh = make_mesh(axis_name) if mesh is None else mesh
    num_devices = mesh_size(mesh)
    check_divisible(config, num_devices)
    local = make_trainer(config, axis_name, num_devices)
    specs = state_specs(axis_name)
    shardings = jax.tree.map(
        lambda spec: NamedSharding(mesh, spec),
        specs,
        is_leaf=lambda x: isinstance(x, P),
    )

    def init(key, hp: Hyperparams, env_params=None) -> TrainState:
        env_params = local.default_env_params if env_params is None else env_params
        state = local.init(key, hp, env_params)
        keys = device_keys(state.rollout.key, num_devices)
        state = state._replace(rollout=state.rollout._replace(key=keys))
        return jax.lax.with_sharding_constraint(state, shardings)

    def local_run(state: TrainState, hp: Hyperparams, env_params, num_updates):
        """The updates on this device's ``[B/D]`` environments; the device's
        key arrives as a ``[1]`` slice of the ``[D]`` keys."""
        state = state._replace(rollout=state.rollout._replace(key=state.rollout.key[0]))
        state, metrics = local.run(state, hp, env_params, num_updates)
        key = state.rollout.key[None]
        return state._replace(rollout=state.rollout._replace(key=key)), metrics

    def run(state: TrainState, hp: Hyperparams, env_params=None, num_updates=1):
        env_params = local.default_env_params if env_params is None else env_params
        sharded = jax.shard_map(
            functools.partial(local_run, num_updates=num_updates),
            mesh=mesh,
            in_specs=(specs, P(), P()),
            out_specs=(specs, P()),
        )
        return sharded(state, hp, env_params)

    return local._replace(init=init, run=run)


def make_train_dp(
    config: PPOConfig, mesh: Mesh | None = None, axis_name: str = DATA_AXIS
) -> Callable[..., TrainOutput]:
    """``train(key, hyperparams, env_params=None) -> TrainOutput``, data-parallel:
    ``make_trainer_dp``'s whole run.

    Wrap in ``jax.jit``. The returned state's params/opt state are
    replicated, its rollout state is split over devices (``rollout.key`` is
    ``[D]`` keys), and ``metrics[name]`` is ``[num_updates]`` as in
    ``make_train``.

    On several processes every process calls it with the same host (numpy)
    arguments, e.g. ``jax.jit(lambda s, hp: train(jax.random.key(s), hp))``
    with a numpy seed, so no input is tied to one process's device.
    """
    return whole_run(make_trainer_dp(config, mesh, axis_name))
