"""The dynamic checks of an environment: one compiled rollout, run.

``Rollouts(env, num_envs, num_steps)`` compiles ``jit(vmap(episode))`` once:
``B`` environments take ``T`` random actions from a reset; an episode that
ends restarts from a fresh reset *outside* ``step`` (as ``AutoReset`` does),
so ``step`` itself must never reset. Params are traced: other values
(``ondevice_rl.checks.params``) never recompile. What each step saw comes back as a
``Record`` ``[B, T, ...]`` and is checked on the host, where a failure can
name the environment and the step.

``eager`` replays the first steps of environment 0 op by op, without ``jit``:
the same numbers are expected (randomness drawn outside the key — NumPy,
Python — differs between the two, or between two eager runs).
"""

import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.checks.report import CheckResult, leaves_with_paths
from ondevice_rl.checks.static import action_mask, is_space
from ondevice_rl.env.spaces import Discrete

#: ``params.max_steps`` for "no time limit within the rollout".
NO_LIMIT = 2**30


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
    first_obs: Any  # [B, *obs_shape], the reset's observation
    first_time: jax.Array  # [B] int32, the reset's state.time
    steps: Record  # [B, T, ...]


def _select(done: jax.Array, on_true: Any, on_false: Any) -> Any:
    return jax.tree.map(lambda a, b: jnp.where(done, a, b), on_true, on_false)


class Rollouts:
    """The rollout program of ``env`` (``num_envs`` × ``num_steps``)."""

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
            action_mask(ts.obs, ts.info),
        )
        return _select(done, fresh, ts.state), record

    def episode(self, key: jax.Array, params: Any) -> Rollout:
        """``num_steps`` steps of one environment from a reset."""
        reset_key, steps_key = jax.random.split(key)
        obs, state = self.env.reset(reset_key, params)
        keys = jax.random.split(steps_key, self.num_steps)
        _, records = jax.lax.scan(lambda s, k: self.step(params, s, k), state, keys)
        return Rollout(obs, state.time, records)

    def keys(self, seed: int) -> jax.Array:
        return jax.random.split(jax.random.key(seed), self.num_envs)

    def run(self, params: Any, seed: int) -> Rollout:
        """The compiled rollout, on the host (NumPy leaves)."""
        return jax.device_get(self.program(self.keys(seed), params))

    def eager(self, params: Any, seed: int, steps: int) -> list[Record]:
        """Environment 0's first ``steps`` records, op by op (no ``jit``)."""
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


def time_limit_apart(long: Rollout, short: Rollout, limit: int) -> CheckResult:
    """``terminated`` must not depend on ``max_steps``: ``long`` and ``short``
    (same keys; ``short`` with ``max_steps = limit``) agree on it up to and
    including ``short``'s first truncation."""
    name = "termination apart from the time limit"
    for env in range(short.steps.truncated.shape[0]):
        cut = np.flatnonzero(short.steps.truncated[env])
        end = int(cut[0]) + 1 if cut.size else short.steps.truncated.shape[1]
        a, b = long.steps.terminated[env, :end], short.steps.terminated[env, :end]
        if np.any(a != b):
            step = int(np.flatnonzero(a != b)[0])
            return CheckResult(
                name,
                False,
                f"env {env}, step {step}: terminated {bool(b[step])} with max_steps "
                f"{limit}, {bool(a[step])} without a time limit (report the limit "
                "as truncated, not terminated)",
            )
    return CheckResult(name, True, f"terminated the same with max_steps {limit}")


def compare_eager(eager: list[Record], again: list[Record], rollout: Rollout):
    """``(same key → same trajectory, jit equals eager)`` results."""

    def first(tree: Any, t: int) -> Any:
        return jax.tree.map(lambda x: np.asarray(x)[0, t], tree)

    same = all(
        jax.tree.all(jax.tree.map(np.array_equal, a, b))
        for a, b in zip(eager, again, strict=True)
    )
    results = [
        CheckResult(
            "same key, same trajectory",
            same,
            f"two runs of {len(eager)} steps equal"
            if same
            else "two eager runs with the same keys differ (randomness drawn "
            "outside the key: NumPy, Python, a global counter?)",
        )
    ]
    for t, record in enumerate(eager):
        jitted = first(rollout.steps, t)
        for (path, x), y in zip(
            leaves_with_paths(record, "record"), jax.tree.leaves(jitted), strict=True
        ):
            if not np.allclose(np.asarray(x), np.asarray(y), rtol=1e-4, atol=1e-5):
                field = path.removeprefix("record.")
                return [
                    *results,
                    CheckResult(
                        "jit equals eager",
                        False,
                        f"step {t}: {field} is {np.asarray(y)} under jit, "
                        f"{np.asarray(x)} op by op (randomness or state drawn "
                        "outside the traced values, e.g. NumPy at trace time)",
                    ),
                ]
    return [*results, CheckResult("jit equals eager", True, f"{len(eager)} steps")]
