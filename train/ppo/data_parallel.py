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

Device ``d``'s environment randomness comes from ``fold_in(key, d)`` (device 0
keeps ``key``), so results depend on the device count.
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from ondevice_rl.devices.sharding import (
    DATA_AXIS,
    make_mesh,
    mesh_size,
)
from ondevice_rl.train.kit.protocol import TrainOutput
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


def make_train_dp(
    config: PPOConfig, mesh: Mesh | None = None, axis_name: str = DATA_AXIS
) -> Callable[..., TrainOutput]:
    """``train(key, hyperparams, env_params=None) -> TrainOutput``, data-parallel.

    Wrap in ``jax.jit``. ``mesh`` is a 1-D mesh named ``axis_name`` (default:
    every device). The returned state's params/opt state are replicated, its
    rollout state is split over devices (``rollout.key`` is ``[D]`` keys), and
    ``metrics[name]`` is ``[num_updates]`` as in ``make_train``.

    On several processes every process calls it with the same host (numpy)
    arguments, e.g. ``jax.jit(lambda s, hp: train(jax.random.key(s), hp))``
    with a numpy seed, so no input is tied to one process's device.
    """
    mesh = make_mesh(axis_name) if mesh is None else mesh
    num_devices = mesh_size(mesh)
    check_divisible(config, num_devices)
    trainer = make_trainer(config, axis_name, num_devices)
    local_trainer_run = trainer.run

    def local_run(state: TrainState, hp: Hyperparams, env_params):
        """All updates on this device's ``[B/D]`` environments; the device's key
        arrives as a ``[1]`` slice of the ``[D]`` keys."""
        state = state._replace(rollout=state.rollout._replace(key=state.rollout.key[0]))
        state, metrics = local_trainer_run(state, hp, env_params, config.num_updates)
        key = state.rollout.key[None]
        return state._replace(rollout=state.rollout._replace(key=key)), metrics

    replicated, split = P(), P(axis_name)
    state_specs = TrainState(*[replicated] * len(TrainState._fields))._replace(
        rollout=split
    )
    run = jax.shard_map(
        local_run,
        mesh=mesh,
        in_specs=(state_specs, replicated, replicated),
        out_specs=(state_specs, replicated),
    )

    def train(key, hyperparams: Hyperparams, env_params=None) -> TrainOutput:
        env_params = trainer.default_env_params if env_params is None else env_params
        state = trainer.init(key, hyperparams, env_params)
        keys = device_keys(state.rollout.key, num_devices)
        state = state._replace(rollout=state.rollout._replace(key=keys))
        state, metrics = run(state, hyperparams, env_params)
        return TrainOutput(state, metrics)

    return train
