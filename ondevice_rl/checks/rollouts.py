"""Stage 2 of ``check_env``: the compiled rollout, with the default params.

``Rollouts(env, num_envs, num_steps)`` compiles ``jit(vmap(episode))`` once:
``B`` environments take ``T`` random actions from a reset; an episode that
ends restarts from a fresh reset *outside* ``step`` (as ``AutoReset`` does),
so ``step`` itself must never reset. Params are traced: the later stages run
other values through the same program without recompiling. What each step
saw comes back as a ``Record`` ``[B, T, ...]`` and is checked on the host by
``rollout_checks``, where a failure can name the environment and the step.

``default_rollout`` compiles and runs the program with the default params
("jit and vmap"), checks what it saw (observations also against their
space) and measures its steps/s. Stage 3 (``ondevice_rl.checks.params``)
runs the program with other params sets; stage 4
(``ondevice_rl.checks.eager``) compares its first steps with ``eager``, the
same steps op by op.
"""

import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.checks.report import CheckResult, leaves_with_paths, raised
from ondevice_rl.checks.static import is_space
from ondevice_rl.env.masks import split_action_mask
from ondevice_rl.env.spaces import Discrete


class Record(NamedTuple):
    """One step of one environment (``[B, T, ...]`` once stacked)."""

    time_before: jax.Array  # [] int32, state.time before the step
    time_after: jax.Array  # [] int32, ts.state.time
    obs: Any  # [*obs_shape] (a pytree for pytree observations)
    reward: jax.Array  # [] float32
    terminated: jax.Array  # [] bool
    truncated: jax.Array  # [] bool
    mask: Any  # [A] bool action mask, or None


class Rollout(NamedTuple):
    """What ``Rollouts.run`` returns (NumPy leaves)."""

    first_obs: Any  # [B, *obs_shape], the reset's observation
    first_time: jax.Array  # [B] int32, the reset's state.time
    steps: Record  # [B, T, ...]


def _select(done: jax.Array, on_true: Any, on_false: Any) -> Any:
    return jax.tree.map(lambda a, b: jnp.where(done, a, b), on_true, on_false)


class Rollouts:
    """The rollout program of ``env``: ``B = num_envs`` environments ×
    ``T = num_steps`` steps."""

    def __init__(self, env: Any, num_envs: int, num_steps: int):
        self.env, self.num_envs, self.num_steps = env, num_envs, num_steps
        self.program = jax.jit(jax.vmap(self.episode, in_axes=(0, None)))

    def step(self, params: Any, state: Any, key: jax.Array) -> tuple[Any, Record]:
        """One random action, and a fresh reset where the episode ended."""
        act_key, step_key, reset_key = jax.random.split(key, 3)
        action = self.env.action_space(params).sample(act_key)
        ts = self.env.step(step_key, state, action, params)
        done = jnp.logical_or(ts.terminated, ts.truncated)
        _, fresh = self.env.reset(reset_key, params)
        record = Record(
            state.time,
            ts.state.time,
            ts.obs,
            ts.reward,
            ts.terminated,
            ts.truncated,
            split_action_mask(ts.obs)[1],
        )
        return _select(done, fresh, ts.state), record

    def episode(self, key: jax.Array, params: Any) -> Rollout:
        """``num_steps`` steps of one environment from a reset (records
        ``[T, ...]``)."""
        reset_key, steps_key = jax.random.split(key)
        obs, state = self.env.reset(reset_key, params)
        keys = jax.random.split(steps_key, self.num_steps)
        _, records = jax.lax.scan(lambda s, k: self.step(params, s, k), state, keys)
        return Rollout(obs, state.time, records)

    def keys(self, seed: int) -> jax.Array:
        """``[B]`` keys, one per environment."""
        return jax.random.split(jax.random.key(seed), self.num_envs)

    def run(self, params: Any, seed: int) -> Rollout:
        """The compiled rollout (``[B, T, ...]`` records), on the host (NumPy
        leaves)."""
        return jax.device_get(self.program(self.keys(seed), params))

    def eager(self, params: Any, seed: int, steps: int) -> list[Record]:
        """Environment 0's first ``steps`` records, op by op (no ``jit``),
        from the keys ``run`` gives it."""
        reset_key, steps_key = jax.random.split(self.keys(seed)[0])
        _, state = self.env.reset(reset_key, params)
        records = []
        for key in jax.random.split(steps_key, self.num_steps)[:steps]:
            state, record = self.step(params, state, key)
            records.append(jax.device_get(record))
        return records

    def steps_per_second(self, params: Any, seed: int, min_seconds: float) -> float:
        """``B * T`` over the best time of the compiled rollout (compiled and
        run once before)."""
        keys, best, spent = self.keys(seed), float("inf"), 0.0
        while spent < min_seconds or best == float("inf"):
            start = time.perf_counter()
            jax.block_until_ready(self.program(keys, params))
            took = time.perf_counter() - start
            best, spent = min(best, took), spent + took
        return self.num_envs * self.num_steps / best


def _where(bad: np.ndarray) -> tuple[int, int]:
    """``(env, step)`` of the first True in ``bad`` ``[B, T]``."""
    env, step = np.argwhere(bad)[0]
    return int(env), int(step)


def _float_leaves(tree: Any, prefix: str) -> list[tuple[str, np.ndarray]]:
    return [
        (path, np.asarray(leaf))
        for path, leaf in leaves_with_paths(tree, prefix)
        if jnp.issubdtype(np.asarray(leaf).dtype, jnp.floating)
    ]


def _outside(obs: Any, space: Any, steps: bool) -> str | None:
    """The first observation entry outside its declared space, described
    (``obs`` ``[B, *shape]``, or ``[B, T, *shape]`` if ``steps``)."""
    spaces = jax.tree.leaves(space, is_leaf=is_space)
    named = leaves_with_paths(obs, "obs")
    for (path, leaf), leaf_space in zip(named, spaces, strict=True):
        leaf = np.asarray(leaf)
        if isinstance(leaf_space, Discrete):
            low, high = np.asarray(0), np.asarray(int(leaf_space.n) - 1)
        else:
            low, high = np.asarray(leaf_space.low), np.asarray(leaf_space.high)
        low = np.broadcast_to(low, leaf_space.shape)
        high = np.broadcast_to(high, leaf_space.shape)
        bad = (leaf < low) | (leaf > high)
        if bad.any():
            index = tuple(int(i) for i in np.argwhere(bad)[0])
            entry = index[2:] if steps else index[1:]
            where = (
                f"env {index[0]}, step {index[1]}"
                if steps
                else f"env {index[0]}, reset"
            )
            return (
                f"{where}: {path}{list(entry)} is {leaf[index]:.4g}, outside "
                f"[{low[entry]:.4g}, {high[entry]:.4g}]"
            )
    return None


def rollout_checks(
    rollout: Rollout, params: Any, obs_space: Any = None
) -> list[CheckResult]:
    """What ``rollout`` (from ``Rollouts.run`` with ``params``) shows;
    ``obs_space`` (if given) bounds the observations."""
    s = rollout.steps
    limit = int(params.max_steps)
    ends = int(np.sum(s.terminated)), int(np.sum(s.truncated))
    results = []

    def add(name: str, bad: np.ndarray, describe, passed: str) -> None:
        if np.any(bad):
            env, step = _where(np.asarray(bad).reshape(bad.shape[0], -1))
            results.append(CheckResult(name, False, describe(env, step)))
        else:
            results.append(CheckResult(name, True, passed))

    add(
        "starts at time 0",
        (rollout.first_time != 0)[:, None],
        lambda e, _: f"env {e}: reset's state.time is {rollout.first_time[e]}",
        "reset's state.time is 0",
    )
    add(
        "no reset inside step",
        s.time_after != s.time_before + 1,
        lambda e, t: (
            f"env {e}, step {t}: state.time went {s.time_before[e, t]} → "
            f"{s.time_after[e, t]} (step must not reset; AutoReset does)"
        ),
        "state.time counts on through every episode end",
    )
    want = s.time_after >= limit
    add(
        "truncation at max_steps",
        s.truncated != want,
        lambda e, t: (
            f"env {e}, step {t}: truncated {bool(s.truncated[e, t])} at time "
            f"{s.time_after[e, t]} with max_steps {limit}"
        ),
        f"{ends[1]} truncations, each at max_steps; {ends[0]} terminations",
    )
    finite = [*_float_leaves(rollout.first_obs, "reset obs")]
    finite += [*_float_leaves(s.obs, "obs"), ("reward", np.asarray(s.reward))]
    problem = next((p for p, x in finite if not np.all(np.isfinite(x))), None)
    results.append(
        CheckResult(
            "finite values",
            problem is None,
            f"{problem} is not finite" if problem else "obs and rewards finite",
        )
    )
    if obs_space is not None:
        problem = _outside(rollout.first_obs, obs_space, False) or _outside(
            s.obs, obs_space, True
        )
        results.append(
            CheckResult("obs within the space", problem is None, problem or "yes")
        )
    if s.mask is not None:
        add(
            "action mask",
            # A terminal state is never acted in: its mask may allow nothing.
            ~np.any(s.mask, axis=-1) & ~np.asarray(s.terminated),
            lambda e, t: f"env {e}, step {t}: the mask allows no action",
            "allows an action in every state acted in",
        )
    return results


class DefaultRollout(NamedTuple):
    """Stage 2's outcome.

    Attributes:
        rollouts: the compiled rollout, for the later stages.
        compiled: the "jit and vmap" result.
        rollout: the default params' rollout (``[B, T, ...]``), None where it
            did not compile or run.
        checks: ``rollout_checks`` of it (empty if it did not run).
        steps_per_second: of the program (None if not measured).
        speed_setup: how it was measured.
    """

    rollouts: Rollouts
    compiled: CheckResult
    rollout: Rollout | None
    checks: list[CheckResult]
    steps_per_second: float | None
    speed_setup: str


def default_rollout(
    env: Any,
    params: Any,
    num_envs: int,
    num_steps: int,
    seed: int,
    speed_seconds: float,
) -> DefaultRollout:
    """Compiles and runs the rollout of ``num_envs`` × ``num_steps`` with
    ``params``, checks it, and measures steps/s for ``speed_seconds`` (0:
    not measured)."""
    rollouts = Rollouts(env, num_envs, num_steps)
    start = time.perf_counter()
    try:
        rollout = rollouts.run(params, seed)
    except Exception as e:
        failed = CheckResult("jit and vmap", False, raised("the jit(vmap) rollout", e))
        return DefaultRollout(rollouts, failed, None, [], None, "")
    took = time.perf_counter() - start
    shape = f"{num_envs} envs × {num_steps} steps"
    compiled = CheckResult(
        "jit and vmap", True, f"{shape}: compiled, ran ({took:.1f} s)"
    )
    checks = rollout_checks(rollout, params, env.observation_space(params))
    sps, setup = None, ""
    if speed_seconds > 0:
        sps = rollouts.steps_per_second(params, seed, speed_seconds)
        setup = (
            f"jit(vmap) of {num_envs} envs × {num_steps} steps, random actions, "
            f"resets included; {jax.devices()[0].platform}"
        )
    return DefaultRollout(rollouts, compiled, rollout, checks, sps, setup)
