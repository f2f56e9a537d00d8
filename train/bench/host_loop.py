"""The classic design: environments on the host, a JAX policy and learner.

gymnasium's synchronous vector env steps ``B`` CartPoles in Python. Every env
step the observations go host→device (as the argument of the jitted policy,
jit's fast dispatch path), the policy samples actions, and the actions come
back device→host (``get``). After ``T`` steps
the host-side part of the batch (rewards, terminated, truncated, final obs)
is sent over once and one jitted update runs: GAE (``ondevice_rl.gae.gae``),
then epochs × minibatches of ``ppo_loss``: the fused loop's own
``Trainer.learn``, with its network, optimiser and hyperparameters. Every
transfer goes through a ``TransferCounter``, so the counts are exact by
construction.
"""

import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.networks import log_prob, sample_action
from ondevice_rl.rollout import Transition
from ondevice_rl.train.bench.transfers import TransferCounter
from ondevice_rl.train.ppo import PPOConfig, Trainer, make_trainer

FINAL_WINDOW = 10


class HostBatch(NamedTuple):
    """What only the host knows after a rollout, ``[T, B, ...]`` NumPy."""

    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    final_obs: np.ndarray  # observation reached before any auto-reset

    @classmethod
    def zeros(cls, num_steps: int, obs_shape: tuple) -> "HostBatch":
        """Empty ``[T, B, ...]`` buffers; ``obs_shape`` is ``(B, *obs)``."""
        steps = (num_steps, obs_shape[0])
        return cls(
            np.zeros(steps, np.float32),
            np.zeros(steps, bool),
            np.zeros(steps, bool),
            np.zeros((num_steps, *obs_shape), np.float32),
        )


def make_learner(trainer: Trainer):
    """``(act, learn)``, both jitted, around the fused loop's own ``learn``.

    ``act(params, obs [B, O], key) -> (action [B], log_prob [B], value [B],
    key, obs)``, the last the observations as a device array for ``learn``.
    ``learn(params, opt_state, steps, host: HostBatch, key, hp) -> (params,
    opt_state, key, total_loss)`` where ``steps`` is the list of ``T`` device
    tuples ``(obs [B, O], action [B], log_prob [B], value [B])`` from ``act``
    (stacked inside the program: one dispatch, no transfer).
    """
    network = trainer.network

    @jax.jit
    def act(params, obs, key):
        key, sample_key = jax.random.split(key)
        pi = network.apply(params, obs)
        action = sample_action(sample_key, pi)
        return action, log_prob(pi, action), pi.value, key, obs

    @jax.jit
    def learn(params, opt_state, steps, host, key, hp):
        obs, action, logp, value = (jnp.stack(x) for x in zip(*steps, strict=True))
        traj = Transition(
            obs=obs,
            action=action,
            log_prob=logp,
            value=value,
            reward=host.reward,
            terminated=host.terminated,
            truncated=host.truncated,
            final_obs=host.final_obs,
            episode_done=None,
            episode_return=None,
            episode_length=None,
        )
        key, learn_key = jax.random.split(key)
        params, opt_state, stats = trainer.learn(params, opt_state, traj, learn_key, hp)
        return params, opt_state, key, stats.total_loss

    return act, learn


def run_host_loop(config: PPOConfig, seed: int = 0, counter=None) -> dict:
    """Trains ``config`` (CartPole-v1) the classic way; returns the record.

    ``transfers_per_step`` counts calls per vector step (all ``B`` envs),
    ``transfers_per_env_step`` per single env step.
    """
    import gymnasium
    from gymnasium.vector import AutoresetMode

    counter = TransferCounter() if counter is None else counter
    trainer = make_trainer(config)
    network = trainer.network
    act, learn = make_learner(trainer)
    hp = config.hyperparams
    B, T = config.num_envs, config.num_steps
    vec = gymnasium.make_vec(
        config.env,
        num_envs=B,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
    )
    obs, _ = vec.reset(seed=seed)
    key, net_key = jax.random.split(jax.random.PRNGKey(seed))
    params = network.init(net_key, jnp.zeros(obs.shape[1:], jnp.float32))
    opt_state = trainer.init_opt_state(params, hp)

    t0 = time.perf_counter()  # compile both programs (one warm-up call each)
    host_zeros = HostBatch.zeros(T, obs.shape)
    *warm_step, _, warm_obs = act(params, obs.astype(np.float32), key)
    warm_steps = [(warm_obs, *warm_step[:3])] * T
    jax.block_until_ready(learn(params, opt_state, warm_steps, host_zeros, key, hp))
    compile_s = time.perf_counter() - t0

    episode_return = np.zeros(B)
    update_returns, last = [], float("nan")
    t0 = time.perf_counter()
    for _ in range(config.num_updates):
        steps = []  # T tuples of device arrays, stacked inside ``learn``
        host = HostBatch.zeros(T, obs.shape)
        finished = []
        for t in range(T):
            obs_in = counter.as_argument(obs.astype(np.float32))
            action_d, logp, value, key, obs_d = act(params, obs_in, key)
            obs, reward, term, trunc, info = vec.step(counter.get(action_d))
            steps.append((obs_d, action_d, logp, value))
            host.reward[t], host.terminated[t], host.truncated[t] = reward, term, trunc
            host.final_obs[t] = obs
            if "_final_obs" in info:  # envs that ended: their pre-reset obs
                done = info["_final_obs"]
                host.final_obs[t, done] = np.stack(info["final_obs"][done])
            episode_return += reward
            ended = term | trunc
            finished += list(episode_return[ended])
            episode_return[ended] = 0.0
        batch = counter.put(host)
        params, opt_state, key, _ = learn(params, opt_state, steps, batch, key, hp)
        last = float(np.mean(finished)) if finished else last
        update_returns.append(last)
    jax.block_until_ready(params)
    run_s = time.perf_counter() - t0
    vec.close()

    env_steps = config.num_updates * config.batch_size
    vector_steps = config.num_updates * T
    return dict(
        timesteps=env_steps,
        compile_s=round(compile_s, 3),
        run_s=round(run_s, 3),
        sps=round(env_steps / run_s),
        final_return=round(float(np.nanmean(update_returns[-FINAL_WINDOW:])), 1),
        transfers=counter.as_dict(),
        transfers_per_step=round(counter.total / vector_steps, 4),
        transfers_per_env_step=round(counter.total / env_steps, 4),
    )
