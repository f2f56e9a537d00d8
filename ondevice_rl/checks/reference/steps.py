"""Step 3 of the reference comparison: the port and its reference step by
step (``check_conformance``).

Both take the same random actions. Before every step the reference is set to
the port's exact state (``sync_state``), so float32-vs-float64 rounding
cannot accumulate into chaos and any difference is the error of one step::

    import gymnasium
    from ondevice_rl import make
    from ondevice_rl.checks.reference import check_conformance
    from ondevice_rl.envs.gymnasium_sync import SYNC_FUNCTIONS

    env, params = make("CartPole-v1")
    report = check_conformance(
        env, gymnasium.make("CartPole-v1"), sync_state=SYNC_FUNCTIONS["CartPole-v1"]
    )
    assert report.ok, report
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.checks.reference.spaces import reference_action
from ondevice_rl.env.types import Environment

#: ``sync_state(reference_env, jax_state)``: sets the reference to the port's
#: state (including the time limit's step count); may return the reference's
#: observation of that state (``[*obs_shape]``) or None.
SyncFn = Callable[[Any, Any], Any]
#: ``start_state_fn(key, state, params) -> state``: edits a fresh episode's
#: start state (traceable), e.g. to start close to the time limit.
StartStateFn = Callable[[jax.Array, Any, Any], Any]


class Mismatch(NamedTuple):
    """One disagreement: at global ``step``, ``field`` of the reference
    (``expected``) differs from the port's (``got``)."""

    step: int
    field: str
    expected: Any
    got: Any


@dataclass(frozen=True)
class ConformanceReport:
    """Outcome of ``check_conformance``.

    Attributes:
        name: the port's name.
        steps: environment steps compared.
        episodes: episodes that ended (terminated or truncated, per the port).
        terminations: steps where the port reported ``terminated``.
        truncations: steps where the port reported ``truncated``.
        mismatches: every disagreement found, in order.
    """

    name: str
    steps: int
    episodes: int
    terminations: int
    truncations: int
    mismatches: list[Mismatch] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def __str__(self) -> str:
        head = (
            f"{self.name}: {self.steps} steps, {self.episodes} episodes "
            f"({self.terminations} terminated, {self.truncations} truncated), "
            f"{len(self.mismatches)} mismatches"
        )
        if self.ok:
            return head + ": OK"
        lines = [head + ":"]
        for m in self.mismatches[:10]:
            lines.append(
                f"  step {m.step} {m.field}: expected {m.expected!r}, got {m.got!r}"
            )
        if len(self.mismatches) > 10:
            lines.append(f"  ... and {len(self.mismatches) - 10} more")
        return "\n".join(lines)

    def one_line(self) -> str:
        """The head line, and the first two mismatches if any."""
        lines = str(self).splitlines()
        return lines[0] if self.ok else "; ".join(x.strip() for x in lines[:3])


def _close(expected: Any, got: Any, atol: float, rtol: float) -> bool:
    expected, got = np.asarray(expected), np.asarray(got)
    if expected.shape != got.shape:
        return False
    return bool(np.allclose(got, expected, atol=atol, rtol=rtol))


def check_conformance(
    jax_env: Environment,
    reference_env: Any,
    *,
    sync_state: SyncFn,
    params: Any = None,
    num_steps: int = 2000,
    seed: int = 0,
    atol: float = 1e-4,
    rtol: float = 1e-4,
    action_sampler: Callable[[jax.Array], jax.Array] | None = None,
    start_state_fn: StartStateFn | None = None,
) -> ConformanceReport:
    """Steps ``jax_env`` and ``reference_env`` side by side and compares them.

    Args:
        jax_env: an unwrapped port (``reset``/``step``/``observe``).
        reference_env: a gymnasium env from ``gymnasium.make`` (with its
            ``TimeLimit``), reset here with ``seed``.
        sync_state: ``sync_state(reference_env, jax_state)`` sets the reference
            to the port's state, time limit included; called before every
            step. If it returns an array, that is taken as the reference's
            observation of the synced state and compared (field ``reset_obs``)
            with the port's at every episode start.
        params: the port's params; ``jax_env.default_params()`` if None.
        num_steps: steps to compare; episodes reset as they end.
        seed: seeds the actions, the port's resets and the reference.
        atol, rtol: tolerances for ``obs`` and ``reward``; ``terminated`` and
            ``truncated`` must be equal.
        action_sampler: traceable ``key -> action``; by default the port's
            action space's ``sample``. Drawn for all steps at once
            (``[num_steps, *action_shape]``).
        start_state_fn: traceable ``(key, state, params) -> state`` applied to
            each fresh episode's state, e.g. to start some episodes near the
            time limit (``start_near_time_limit``) or the goal.

    Returns:
        A ``ConformanceReport``; ``report.ok`` when nothing differed. Episode
        ends follow the port: the reference is reset and re-synced then.
    """
    if params is None:
        params = jax_env.default_params()
    key_act, key_reset, key_step = jax.random.split(jax.random.PRNGKey(seed), 3)
    sample = action_sampler or jax_env.action_space(params).sample
    actions = np.asarray(
        jax.jit(jax.vmap(sample))(jax.random.split(key_act, num_steps))
    )
    # Host copies: indexing a device array per step would cost a dispatch.
    step_keys = np.asarray(jax.random.split(key_step, num_steps))
    reset_keys = np.asarray(jax.random.split(key_reset, num_steps + 1))

    def reset(key, params):
        key_env, key_start = jax.random.split(key)
        obs, state = jax_env.reset(key_env, params)
        if start_state_fn is not None:
            state = start_state_fn(key_start, state, params)
            obs = jax_env.observe(state, params)
        return obs, state

    reset = jax.jit(reset)
    step = jax.jit(jax_env.step)
    ref_space = reference_env.action_space
    mismatches: list[Mismatch] = []

    def compare(i: int, name: str, expected: Any, got: Any, exact: bool) -> None:
        same = (
            bool(np.asarray(expected) == np.asarray(got))
            if exact
            else _close(expected, got, atol, rtol)
        )
        if not same:
            mismatches.append(Mismatch(i, name, np.asarray(expected), np.asarray(got)))

    spec = getattr(reference_env, "spec", None)
    limit = getattr(spec, "max_episode_steps", None)
    if limit is not None and int(params.max_steps) != limit:
        mismatches.append(Mismatch(0, "max_steps", limit, int(params.max_steps)))

    reference_env.reset(seed=seed)
    resets = 0

    def start_episode(i: int) -> Any:
        nonlocal resets
        obs, state = jax.device_get(reset(reset_keys[resets], params))
        resets += 1
        ref_obs = sync_state(reference_env, state)
        if ref_obs is not None:
            compare(i, "reset_obs", ref_obs, obs, exact=False)
        return state

    state = start_episode(0)
    episodes = terminations = truncations = 0
    for i in range(num_steps):
        sync_state(reference_env, state)
        ts = jax.device_get(step(step_keys[i], state, actions[i], params))
        ref = reference_env.step(reference_action(actions[i], ref_space))
        terminated, truncated = bool(ts.terminated), bool(ts.truncated)
        compare(i, "obs", ref[0], ts.obs, exact=False)
        compare(i, "reward", ref[1], ts.reward, exact=False)
        compare(i, "terminated", bool(ref[2]), terminated, exact=True)
        compare(i, "truncated", bool(ref[3]), truncated, exact=True)
        terminations += terminated
        truncations += truncated
        state = ts.state
        if terminated or truncated:
            episodes += 1
            reference_env.reset()
            state = start_episode(i + 1)
    return ConformanceReport(
        name=jax_env.name,
        steps=num_steps,
        episodes=episodes,
        terminations=terminations,
        truncations=truncations,
        mismatches=mismatches,
    )


def start_near_time_limit(
    probability: float = 0.5, steps_left: int = 3
) -> StartStateFn:
    """A ``start_state_fn`` that, with ``probability``, starts the episode
    ``steps_left`` steps before the time limit (so the limit is reached by
    policies that would otherwise end episodes earlier)."""

    def start(key, state, params):
        near = jax.random.uniform(key) < probability
        time = jnp.where(near, params.max_steps - steps_left, state.time)
        return state._replace(time=time.astype(state.time.dtype))

    return start
