"""A trained run's policy, ready to act.

* ``load_policy(run_dir, member=None) -> Policy``: ``policy(obs, key=None)
  -> action``, jit-compiled, for one observation ``[*obs_shape]`` or a batch
  ``[B, *obs_shape]`` (also ``ondevice_rl.load_policy``), acting with the
  trainer's ``policy`` (``train/kit/policies.py``) on the parameters
  ``train/use/loading.py`` reads (a run's newest verified checkpoint, or a
  sweep member's final parameters).
* ``run_in_gymnasium(policy, env_id)``: the loaded policy in the original
  gymnasium env, on the host, to check policy and port against the real thing.
"""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.train.use.loading import LoadedRun, load_run


class Policy:
    """A trained policy: ``policy(obs, key=None, mask=None) -> action``.

    ``obs``: ``[*obs_shape]`` or ``[B, *obs_shape]`` (a pytree observation:
    the same leaves, each with the same batch); the action is ``[]`` /
    ``[B]`` int32 (discrete) or ``[A]`` / ``[B, A]`` float32 (Box, clipped).
    Deterministic when ``key`` is None, sampled from the policy otherwise.
    ``mask`` ``[A]`` / ``[B, A]`` bool: the legal discrete actions (an
    observation's own action mask is honoured too). Jit-compiled (once per
    batch shape). A policy with memory keeps its carry between calls, one
    episode's worth: call ``reset()`` when a new episode starts (a new batch
    shape starts afresh too).

    Attributes: ``params`` (``PolicyParams``: the network's and any
    observation statistics), ``config``, ``env`` (its name), ``obs_shape``
    (None for a pytree observation), ``obs_spec`` (its leaves' shapes and
    dtypes), ``step`` (the checkpoint's update), ``run`` (the ``LoadedRun``).
    """

    def __init__(self, run: LoadedRun):
        self.run = run
        self.params = run.params
        self.config = run.spec.config
        self.env = self.config.env
        self.step = run.step
        self.obs_shape = run.trainer.setup.obs_shape
        self.obs_spec = run.trainer.setup.obs_spec
        act = run.trainer.policy
        self._initial_carry = run.trainer.initial_carry
        self._carry, self._batch = None, None
        self._greedy = jax.jit(lambda p, c, obs, m: act(p, c, obs, None, True, m))
        self._sample = jax.jit(lambda p, c, obs, key, m: act(p, c, obs, key, False, m))

    def __call__(
        self, obs: Any, key: jax.Array | None = None, mask: Any = None
    ) -> jax.Array:
        obs, batch = self._checked(obs)
        if mask is not None:
            mask = jnp.asarray(mask, jnp.bool_)
        if self._carry is None or self._batch != batch:
            self._carry, self._batch = self._initial_carry(batch), batch
        carry = self._carry
        if key is None:
            action, self._carry = self._greedy(self.params, carry, obs, mask)
        else:
            action, self._carry = self._sample(self.params, carry, obs, key, mask)
        return action

    def _checked(self, obs: Any) -> tuple[Any, tuple[int, ...]]:
        """``obs`` as arrays of the space's dtypes, and its batch shape
        (ValueError, one line, if it does not match the space)."""
        spec_leaves, tree = jax.tree.flatten(self.obs_spec)
        try:
            leaves = tree.flatten_up_to(obs)
        except (ValueError, TypeError):
            raise ValueError(
                f"observation {jax.tree.structure(obs)}; expected {tree}"
            ) from None
        leaves = [
            jnp.asarray(x, s.dtype) for x, s in zip(leaves, spec_leaves, strict=True)
        ]
        batches = set()
        for x, s in zip(leaves, spec_leaves, strict=True):
            rank = len(s.shape)
            if x.ndim not in (rank, rank + 1) or x.shape[x.ndim - rank :] != s.shape:
                raise ValueError(
                    f"observation of shape {x.shape}; expected {s.shape} or "
                    f"[B, {', '.join(map(str, s.shape))}]"
                )
            batches.add(x.shape[: x.ndim - rank])
        if len(batches) > 1:
            raise ValueError(f"observation leaves of different batches {batches}")
        return jax.tree.unflatten(tree, leaves), batches.pop()

    def reset(self) -> None:
        """Forgets the carry: the next call starts a new episode."""
        self._carry = None

    def __repr__(self) -> str:
        return f"Policy({self.env!r}, update {self.step})"


def load_policy(run_dir: str | Path, member: int | str | None = None) -> Policy:
    """The policy of ``run_dir``'s newest checkpoint that verifies, or of a
    sweep directory's ``member`` (its number or ``"best"``) (see ``Policy``,
    ``load_run``)."""
    return Policy(load_run(run_dir, member=member))


def run_in_gymnasium(
    policy: Callable,
    env_id: str,
    episodes: int = 10,
    seed: int = 0,
    deterministic: bool = True,
) -> list[float]:
    """Runs ``policy(obs, key=None)`` in ``gymnasium.make(env_id)`` on the
    host for ``episodes`` episodes (reset seeds ``seed, seed + 1, ...``);
    returns their returns. Sampled actions (``deterministic=False``) use keys
    from ``jax.random.key(seed)``."""
    env = gym.make(env_id)
    discrete = isinstance(env.action_space, gym.spaces.Discrete)
    key = jax.random.key(seed)
    returns = []
    try:
        for episode in range(episodes):
            obs, _ = env.reset(seed=seed + episode)
            if hasattr(policy, "reset"):
                policy.reset()  # a policy with memory starts the episode afresh
            total, done, t = 0.0, False, 0
            while not done:
                step_key = None
                if not deterministic:
                    step_key = jax.random.fold_in(jax.random.fold_in(key, episode), t)
                action = np.asarray(policy(obs, step_key))
                action = int(action) if discrete else action.astype(np.float32)
                obs, reward, terminated, truncated, _ = env.step(action)
                total += float(reward)
                done, t = terminated or truncated, t + 1
            returns.append(total)
    finally:
        env.close()
    return returns
