"""The classic design: environments on the host, a JAX policy and learner.

gymnasium's synchronous vector env steps ``B`` CartPoles in Python. Every env
step the observations go host→device (as the argument of the jitted policy,
jit's fast dispatch path), the policy samples actions, and the actions come
back device→host (``get``). After ``T`` steps
the host-side part of the batch (rewards, terminated, truncated, final obs)
is sent over once and one jitted update runs: the fused loop's own
``Trainer.learn`` (PPO: GAE, then epochs × minibatches; A2C: returns, one
gradient step), with its network, optimiser and hyperparameters. Any
on-policy learner whose trainer has ``act`` and ``learn`` can run here.
Every transfer goes through a ``TransferCounter``, so the counts are exact
by construction.
"""

import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.metrics import final_return
from ondevice_rl.rollout import Transition
from ondevice_rl.train.bench.transfers import TransferCounter
from ondevice_rl.train.kit.registry import algorithm_of


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


def make_learner(trainer):
    """``(act, learn)``, both jitted, around the fused loop's own ``act`` and
    ``learn``.

    ``act(params, obs [B, O], key) -> (env_action [B], (obs, action,
    extras), key)``, the middle the step's device arrays kept for ``learn``.
    ``learn(params, opt_state, steps, host: HostBatch, key, hp) -> (params,
    opt_state, key, total_loss)`` where ``steps`` is the list of ``T`` such
    device tuples (stacked inside the program: one dispatch, no transfer).
    """

    @jax.jit
    def act(params, obs, key):
        key, sample_key = jax.random.split(key)
        action, env_action, extras = trainer.host_loop.act(params, obs, sample_key)
        return env_action, (obs, action, extras), key

    @jax.jit
    def learn(params, opt_state, steps, host, key, hp):
        obs, action, extras = jax.tree.map(lambda *xs: jnp.stack(xs), *steps)
        traj = Transition(
            obs=obs,
            action=action,
            reward=host.reward,
            terminated=host.terminated,
            truncated=host.truncated,
            final_obs=host.final_obs,
            extras=extras,
        )
        key, learn_key = jax.random.split(key)
        learn_fn = trainer.host_loop.learn
        params, opt_state, stats = learn_fn(params, opt_state, traj, learn_key, hp)
        return params, opt_state, key, stats.total_loss

    return act, learn


def run_host_loop(config, seed: int = 0, counter=None) -> dict:
    """Trains ``config`` (an on-policy learner's, CartPole-v1) the classic
    way; returns the record.

    ``transfers_per_step`` counts calls per vector step (all ``B`` envs),
    ``transfers_per_env_step`` per single env step.
    """
    import gymnasium
    from gymnasium.vector import AutoresetMode

    counter = TransferCounter() if counter is None else counter
    algorithm = algorithm_of(config)
    trainer = algorithm.make_trainer(config)
    if not algorithm.host_loop:
        raise ValueError(f"bench host drives on-policy learners; not {algorithm.name}")
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
    key, init_key = jax.random.split(jax.random.PRNGKey(seed))
    state = trainer.init(init_key, hp)  # its envs are unused: gymnasium's run
    params, opt_state = state.params, state.opt_state

    t0 = time.perf_counter()  # compile both programs (one warm-up call each)
    host_zeros = HostBatch.zeros(T, obs.shape)
    _, warm_step, _ = act(params, obs.astype(np.float32), key)
    jax.block_until_ready(
        learn(params, opt_state, [warm_step] * T, host_zeros, key, hp)
    )
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
            env_action, step, key = act(params, obs_in, key)
            obs, reward, term, trunc, info = vec.step(counter.get(env_action))
            steps.append(step)
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

    env_steps = config.num_updates * config.steps_per_update
    vector_steps = config.num_updates * T
    return dict(
        timesteps=env_steps,
        compile_s=round(compile_s, 3),
        run_s=round(run_s, 3),
        sps=round(env_steps / run_s),
        final_return=round(final_return(update_returns), 1),
        transfers=counter.as_dict(),
        transfers_per_step=round(counter.total / vector_steps, 4),
        transfers_per_env_step=round(counter.total / env_steps, 4),
    )
