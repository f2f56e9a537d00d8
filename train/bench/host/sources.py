"""Host backends stepped from Python: ``[T, B]`` rollouts for the learner.

* ``gym-sync`` / ``gym-async``: gymnasium's vector envs (async: one process
  per env), resetting an ended env in the same step;
* ``envpool-sync``: EnvPool's C++ thread pool, all ``B`` envs per step. Its
  envs reset on the step *after* an episode ends; that step is taken at
  once for the ended envs alone, so each step of the rollout is a real
  transition of every env, as with gymnasium;
* ``envpool-async``: GA3C's design. The pool holds ``B`` envs and hands
  back whichever ``M < B`` are ready; the policy acts on those. Each env's
  transitions queue up in order, and once every env has ``T`` the learner
  gets them as its ``[T, B]`` rollout; transitions acted with older
  parameters than the update learning on them have a policy lag.

A source has ``act_batches`` (the batch sizes the policy sees),
``collect(policy, T, update) -> Collected`` and ``close()``; ``policy(obs
[n, ...]) -> (env_action, action, extras)`` in host NumPy.
"""

import warnings
from collections import deque
from typing import Any

import jax
import numpy as np

from ondevice_rl.rollout import Transition
from ondevice_rl.train.bench.host.learner import Collected, stack_steps
from ondevice_rl.train.bench.host.targets import host_env_factory

#: The largest gymnasium async vector env (one process per env) we start.
MAX_ASYNC_PROCESSES = 16


def _env_action(action: np.ndarray, discrete: bool) -> np.ndarray:
    return action.astype(np.int32) if discrete else action.astype(np.float32)


class VectorSource:
    """All ``B`` envs stepped together; ``step(action) -> (obs, reward,
    terminated, truncated, final_obs)`` with ended envs already reset."""

    def __init__(self, obs: np.ndarray, step, close, discrete: bool):
        self.obs, self._step, self._close = obs, step, close
        self.discrete = discrete
        self.act_batches = (obs.shape[0],)
        self._returns = np.zeros(obs.shape[0])

    def collect(self, policy, num_steps: int, update: int) -> Collected:
        steps, finished = [], []
        for _ in range(num_steps):
            env_action, action, extras = policy(self.obs)
            obs, reward, terminated, truncated, final_obs = self._step(
                _env_action(env_action, self.discrete)
            )
            steps.append(
                Transition(self.obs, action, reward.astype(np.float32),
                           terminated, truncated, final_obs, extras)
            )  # fmt: skip
            self._returns += reward
            ended = terminated | truncated
            finished += list(self._returns[ended])
            self._returns[ended] = 0.0
            self.obs = obs
        traj = stack_steps(steps)
        return Collected(traj._replace(obs=traj.obs.astype(np.float32),
                                       final_obs=traj.final_obs.astype(np.float32)),
                         finished, [])  # fmt: skip

    def close(self) -> None:
        self._close()


def gym_source(spec: str, num_envs: int, seed: int, mode: str, discrete: bool):
    """gymnasium's ``sync`` or ``async`` vector env of ``spec``."""
    from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

    cls = SyncVectorEnv if mode == "sync" else AsyncVectorEnv
    with warnings.catch_warnings():
        # The forked workers run gymnasium only, never JAX: its warning
        # about forking a multithreaded process does not apply to them.
        warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)
        vec = cls(
            [host_env_factory(spec)] * num_envs,
            autoreset_mode=AutoresetMode.SAME_STEP,
        )
    obs, _ = vec.reset(seed=seed)

    def step(action):
        obs, reward, terminated, truncated, info = vec.step(action)
        final_obs = np.array(obs, np.float32)
        if "_final_obs" in info:  # envs that ended: their pre-reset obs
            done = info["_final_obs"]
            final_obs[done] = np.stack(info["final_obs"][done])
        return obs, reward, terminated, truncated, final_obs

    return VectorSource(np.asarray(obs), step, vec.close, discrete)


def envpool_make(task: str, num_envs: int, seed: int, batch_size: int | None = None):
    import envpool

    with warnings.catch_warnings():
        # EnvPool builds float64-bounded Boxes that gymnasium casts to float32.
        warnings.filterwarnings("ignore", ".*precision lowered", UserWarning)
        return envpool.make(
            task, env_type="gymnasium", num_envs=num_envs, seed=seed,
            batch_size=batch_size or num_envs,
        )  # fmt: skip


def envpool_float64(task: str) -> bool:
    """Whether EnvPool's ``task`` takes float64 actions (its MuJoCo tasks)."""
    import envpool

    spec = envpool.make_spec(task).action_array_spec["action"]
    return np.dtype(spec.dtype) == np.float64


def envpool_sync_source(task: str, num_envs: int, seed: int, discrete: bool):
    """EnvPool stepping all envs per call; ended envs reset at once."""
    env = envpool_make(task, num_envs, seed)
    obs, _ = env.reset()
    ids = np.arange(num_envs, dtype=np.int32)

    def step(action):
        obs, reward, terminated, truncated, _ = env.step(action, ids)
        final_obs = np.array(obs, np.float32)
        ended = np.flatnonzero(terminated | truncated)
        if ended.size:  # EnvPool resets on the next step: take it now
            obs = np.array(obs)
            obs[ended] = env.step(action[ended], ended.astype(np.int32))[0]
        return obs, reward, terminated, truncated, final_obs

    return VectorSource(np.asarray(obs), step, env.close, discrete)


class EnvPoolAsyncSource:
    """GA3C's design on EnvPool: act on whichever ``batch`` envs are ready."""

    def __init__(self, task: str, num_envs: int, seed: int, batch: int, discrete: bool):
        self.env = envpool_make(task, num_envs, seed, batch)
        self.env.async_reset()
        self.discrete, self.act_batches = discrete, (batch,)
        self.queues = [deque() for _ in range(num_envs)]
        self.pending: list[Any] = [None] * num_envs  # acted, awaiting its result
        self._returns = np.zeros(num_envs)

    def collect(self, policy, num_steps: int, update: int) -> Collected:
        finished = []
        while min(len(q) for q in self.queues) < num_steps:
            obs, reward, terminated, truncated, info = self.env.recv()
            ids = info["env_id"]
            env_action, action, extras = policy(obs)
            for j, e in enumerate(ids):
                acted = self.pending[e]
                if acted is not None:  # None: this result was a reset
                    self.queues[e].append((*acted, reward[j], terminated[j],
                                           truncated[j], obs[j]))  # fmt: skip
                    self._returns[e] += reward[j]
                ended = acted is not None and (terminated[j] or truncated[j])
                if ended:
                    finished.append(self._returns[e])
                    self._returns[e] = 0.0
                extras_j = jax.tree.map(lambda x, j=j: x[j], extras)
                self.pending[e] = (
                    None if ended else (obs[j], action[j], extras_j, update)
                )
            self.env.send(_env_action(env_action, self.discrete), ids)
        per_env = [[q.popleft() for _ in range(num_steps)] for q in self.queues]
        steps, lags = [], []
        for t in range(num_steps):
            row = [per_env[e][t] for e in range(len(per_env))]
            obs, action, extras, acted, reward, term, trunc, final = zip(
                *row, strict=True
            )
            lags += [update - a for a in acted]
            steps.append(Transition(
                np.stack(obs).astype(np.float32), np.stack(action),
                np.asarray(reward, np.float32), np.asarray(term), np.asarray(trunc),
                np.stack(final).astype(np.float32), stack_steps(list(extras)),
            ))  # fmt: skip
        return Collected(stack_steps(steps), finished, lags)

    def close(self) -> None:
        self.env.close()
