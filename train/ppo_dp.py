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
``ondevice_rl.distributed`` initialised, the mesh holds every process's
devices.

Device ``d``'s environment randomness comes from ``fold_in(key, d)`` (device 0
keeps ``key``), so results depend on the device count.
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from ondevice_rl.gae import gae
from ondevice_rl.networks import ActorCritic
from ondevice_rl.rollout import Transition, rollout
from ondevice_rl.sharding import (
    DATA_AXIS,
    all_masked_mean,
    all_mean,
    make_mesh,
    mesh_size,
)
from ondevice_rl.spaces import Box
from ondevice_rl.train.ppo.config import Hyperparams, PPOConfig
from ondevice_rl.train.ppo.loop import (
    TrainOutput,
    TrainState,
    fast_permutation,
    make_trainer,
)
from ondevice_rl.train.ppo.loss import Minibatch, ppo_loss


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


def make_optimizer(config: PPOConfig, hp: Hyperparams) -> optax.GradientTransformation:
    """The optimiser of ``train.ppo.loop`` (global-norm clip, Adam, linear LR
    annealing over ``num_updates``); its state has the same structure."""
    per_update = config.update_epochs * config.num_minibatches

    def learning_rate(count):
        if not config.anneal_lr:
            return hp.learning_rate
        done = (count // per_update).astype(jnp.float32)
        return hp.learning_rate * (1.0 - done / config.num_updates)

    return optax.chain(
        optax.clip_by_global_norm(hp.max_grad_norm),
        optax.adam(learning_rate, eps=1e-5),
    )


def minibatch_step(apply_fn, tx, params, opt_state, batch: Minibatch, hp, axis_name):
    """One optimiser step on a device's share of a minibatch (in shard_map).

    ``params`` are replicated; they are cast to device-varying so ``jax.grad``
    returns this device's gradient, which ``pmean`` then averages.
    """
    local_params = jax.lax.pcast(params, axis_name, to="varying")
    grads, stats = jax.grad(ppo_loss, argnums=1, has_aux=True)(
        apply_fn, local_params, batch, hp
    )
    grads = all_mean(grads, axis_name)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, stats


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
    trainer = make_trainer(config)
    env, network = trainer.env, trainer.network
    local_batch = config.batch_size // num_devices
    local_minibatch = local_batch // config.num_minibatches
    action_space = env.action_space(trainer.default_env_params)
    if isinstance(action_space, Box):
        low, high = action_space.low, action_space.high

        def to_env_action(action):
            return jnp.clip(action, low, high)
    else:

        def to_env_action(action):
            return action

    def optimise(params, opt_state, traj: Transition, adv, targets, key, hp):
        tx = make_optimizer(config, hp)
        flat = Minibatch(traj.obs, traj.action, traj.log_prob, traj.value, adv, targets)
        flat = jax.tree.map(lambda x: x.reshape((local_batch,) + x.shape[2:]), flat)

        def step(carry, batch):
            params, opt_state = carry
            params, opt_state, stats = minibatch_step(
                network.apply, tx, params, opt_state, batch, hp, axis_name
            )
            return (params, opt_state), stats

        def epoch(carry, epoch_key):
            perm = fast_permutation(epoch_key, local_batch)
            shuffled = jax.tree.map(
                lambda x: jnp.take(x, perm, axis=0).reshape(
                    (config.num_minibatches, local_minibatch) + x.shape[1:]
                ),
                flat,
            )
            return jax.lax.scan(step, carry, shuffled)

        keys = jax.random.split(key, config.update_epochs)
        (params, opt_state), stats = jax.lax.scan(epoch, (params, opt_state), keys)
        return params, opt_state, all_mean(jax.tree.map(jnp.mean, stats), axis_name)

    def local_update(state: TrainState, hp: Hyperparams, env_params):
        """One update on this device's ``[B/D]`` environments."""
        local = state.rollout._replace(key=state.rollout.key[0])
        local, traj = rollout(
            env,
            env_params,
            network.apply,
            state.params,
            local,
            config.num_steps,
            to_env_action,
        )
        next_values = network.apply(
            state.params, traj.final_obs, method=ActorCritic.value
        )
        adv, targets = gae(
            traj.reward,
            traj.value,
            next_values,
            traj.terminated,
            traj.truncated,
            hp.gamma,
            hp.gae_lambda,
        )
        key, opt_key = jax.random.split(local.key)
        params, opt_state, stats = optimise(
            state.params, state.opt_state, traj, adv, targets, opt_key, hp
        )
        done = traj.episode_done
        last_return = all_masked_mean(
            traj.episode_return, done, state.last_return, axis_name
        )
        last_length = all_masked_mean(
            traj.episode_length, done, state.last_length, axis_name
        )
        # Until a first episode ends, report the episodes in progress instead.
        running = local.env_state
        running_return = jax.lax.pmean(running.episode_return.mean(), axis_name)
        running_length = jax.lax.pmean(
            running.episode_length.mean().astype(jnp.float32), axis_name
        )
        metrics = {
            "episode_return": jnp.where(
                jnp.isnan(last_return), running_return, last_return
            ),
            "episode_length": jnp.where(
                jnp.isnan(last_length), running_length, last_length
            ),
            "episodes": jax.lax.psum(done.sum(), axis_name).astype(jnp.float32),
            **stats._asdict(),
        }
        new_rollout = local._replace(key=key[None])
        new_state = TrainState(
            params,
            opt_state,
            new_rollout,
            state.update_step + 1,
            last_return,
            last_length,
        )
        return new_state, metrics

    def local_run(state: TrainState, hp: Hyperparams, env_params):
        def body(state, _):
            return local_update(state, hp, env_params)

        return jax.lax.scan(body, state, None, length=config.num_updates)

    replicated, split = P(), P(axis_name)
    state_specs = TrainState(
        replicated, replicated, split, replicated, replicated, replicated
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
