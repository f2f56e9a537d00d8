"""``check_env``: the checks this project runs on its own environments, for
any environment following the protocol (``ondevice_rl.env.types``).

    from ondevice_rl import make
    from ondevice_rl.checks.check_env import check_env

    env, params = make("CartPole-v1")
    report = check_env(env, params)
    print(report)          # one line per check, pass or fail, and steps/s
    assert report.ok

Static (``ondevice_rl/checks/static.py``, traced, nothing run): declared
spaces, params with ``max_steps``, reset's and step's shapes and dtypes
against the spaces, the state's types kept, no float64 (also with
``jax_enable_x64``). Dynamic (``ondevice_rl/checks/rollouts.py``, one compiled
``jit(vmap)`` rollout run with several params): episodes start at time 0,
``step`` never resets, truncation exactly at ``max_steps`` and termination
independent of it, finite values for random in-range params (which never
recompile), observations within their space, same key → same trajectory,
jitted steps equal to op-by-op ones; and its steps/s. With a reference
(gymnasium) environment and a ``sync_state`` function: spaces, the reset
distribution and ``check_conformance`` (``ondevice_rl/checks/reference.py``).
"""

import time
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from ondevice_rl.checks.params import random_params, replace_params
from ondevice_rl.checks.report import CheckResult, EnvCheckError, raised
from ondevice_rl.checks.rollouts import (
    NO_LIMIT,
    Rollouts,
    compare_eager,
    rollout_checks,
    time_limit_apart,
)
from ondevice_rl.checks.static import no_float64, require_static, static_checks, trace


@dataclass(frozen=True)
class EnvReport:
    """What ``check_env`` found.

    Attributes:
        name: the environment's name.
        results: one ``CheckResult`` per check, in order.
        steps_per_second: of the compiled rollout (None if not measured).
        speed_setup: how it was measured.
        note: what was skipped, and why ("" if nothing).
    """

    name: str
    results: tuple[CheckResult, ...]
    steps_per_second: float | None = None
    speed_setup: str = ""
    note: str = ""

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if not r.ok]

    def __str__(self) -> str:
        lines = [self.name]
        width = max(len(r.name) for r in self.results) + 2
        for r in self.results:
            lines.append(
                f"  {'ok' if r.ok else 'FAIL':<5} {r.name:<{width}} {r.detail}"
            )
        if self.note:
            lines.append(f"  {self.note}")
        if self.steps_per_second is not None:
            lines.append(
                f"speed: {self.steps_per_second:,.0f} steps/s ({self.speed_setup})"
            )
        failed = len(self.failures)
        lines.append(
            f"{len(self.results)} checks: {len(self.results) - failed} passed, "
            f"{failed} failed"
        )
        return "\n".join(lines)


def _no_float64_x64(env: Any, params: Any, current: CheckResult) -> CheckResult:
    """``current`` ("no float64") extended to a trace under jax_enable_x64,
    where default dtypes (``jnp.zeros(3)``, ``jnp.array(0.5)``) widen. An env
    that cannot be traced there at all (gymnax's) passes with a note."""
    if not current.ok:
        return current
    with jax.enable_x64(True):
        try:
            traced = trace(env, params)
        except EnvCheckError as e:
            note = f"; not traceable with jax_enable_x64 ({str(e)[:60]}...)"
            return current._replace(detail=current.detail + note)
        try:
            no_float64(traced)
        except EnvCheckError as e:
            return CheckResult(
                current.name,
                False,
                f"with jax_enable_x64: {e} (give dtypes explicitly, e.g. "
                "jnp.zeros(3, jnp.float32))",
            )
    return current._replace(detail=current.detail + "; also with jax_enable_x64")


def _describe(params: Any) -> str:
    """``max_steps 12, gravity 13.1, ...`` (scalar fields only)."""
    fields = getattr(params, "_fields", ("max_steps",))
    values = [(f, getattr(params, f)) for f in fields]
    numbers = (int, float, np.ndarray, np.number, jax.Array)
    shown = [
        f"{f} {np.asarray(v).item():.4g}"
        for f, v in values
        if isinstance(v, numbers) and np.ndim(v) == 0
    ]
    return ", ".join(shown[:6]) + (", ..." if len(shown) > 6 else "")


def _merge(runs: list[tuple[str, list[CheckResult]]]) -> list[CheckResult]:
    """One result per check over runs: failed where any run failed (naming
    that run's params), else the first run's detail."""
    merged: dict[str, CheckResult] = {}
    count: dict[str, int] = {}
    for label, results in runs:
        for r in results:
            count[r.name] = count.get(r.name, 0) + 1
            labelled = r._replace(detail=f"{r.detail} ({label})")
            if r.name not in merged:
                merged[r.name] = r if r.ok else labelled
            elif merged[r.name].ok and not r.ok:
                merged[r.name] = labelled
    return [
        r._replace(detail=f"{r.detail} ({count[r.name]} params sets)")
        if r.ok and count[r.name] > 1
        else r
        for r in merged.values()
    ]


def _ends(rollouts: list[Any]) -> str:
    """How many episodes ended, and how, over ``rollouts``."""
    terminated = sum(int(np.sum(r.steps.terminated)) for r in rollouts)
    truncated = sum(int(np.sum(r.steps.truncated)) for r in rollouts)
    return f"{truncated} truncations, each at max_steps; {terminated} terminations"


def _dynamic(env, params, rollouts, seed, random_sets, eager_steps) -> list[Any]:
    """The rollout checks (``results``); the default run is compiled first."""
    start = time.perf_counter()
    try:
        default = rollouts.run(params, seed)
    except Exception as e:
        return [CheckResult("jit and vmap", False, raised("the jit(vmap) rollout", e))]
    took = time.perf_counter() - start
    shape = f"{rollouts.num_envs} envs × {rollouts.num_steps} steps"
    results = [
        CheckResult("jit and vmap", True, f"{shape}: compiled, ran ({took:.1f} s)")
    ]
    obs_space = env.observation_space(params)
    runs = [("default params", rollout_checks(default, params, obs_space))]
    limit = int(params.max_steps)
    if limit > rollouts.num_steps:
        short_limit = max(1, rollouts.num_steps // 4)
        other = replace_params(params, max_steps=short_limit)
    else:
        short_limit, other = limit, replace_params(params, max_steps=NO_LIMIT)
    ran = [default, rollouts.run(other, seed)]
    runs.append((_describe(other), rollout_checks(ran[1], other)))
    long, short = ran if limit > rollouts.num_steps else ran[::-1]
    rng = np.random.default_rng(seed)
    for i in range(random_sets):
        sampled = random_params(env, params, rng)
        ran.append(rollouts.run(sampled, seed + 1 + i))
        runs.append((_describe(sampled), rollout_checks(ran[-1], sampled)))
    for r in _merge(runs):
        truncation = r.name == "truncation at max_steps" and r.ok
        results.append(r._replace(detail=_ends(ran)) if truncation else r)
    results.append(time_limit_apart(long, short, short_limit))
    compiles = rollouts.program._cache_size()
    results.append(
        CheckResult(
            "params traced",
            compiles == 1,
            f"{len(runs)} params sets, {compiles} compiled program"
            + ("" if compiles == 1 else "s (params must be arrays of fixed dtypes)"),
        )
    )
    try:
        eager = rollouts.eager(params, seed, eager_steps)
        again = rollouts.eager(params, seed, eager_steps)
    except Exception as e:
        return [*results, CheckResult("jit equals eager", False, raised("op by op", e))]
    return results + compare_eager(eager, again, default)


def check_env(
    env: Any,
    params: Any = None,
    *,
    name: str | None = None,
    num_envs: int = 64,
    num_steps: int = 64,
    random_sets: int = 3,
    eager_steps: int = 3,
    seed: int = 0,
    speed_seconds: float = 0.5,
    reference_env: Any = None,
    sync_state: Any = None,
    reference_steps: int = 2000,
    reset_samples: int = 2000,
) -> EnvReport:
    """Checks ``env`` (unwrapped; ``params``: its defaults if None).

    Args:
        name: shown in the report (default ``env.name``).
        num_envs, num_steps: the rollout's batch and length.
        random_sets: random in-range params sets rolled out besides the
            defaults and a short and a long time limit.
        eager_steps: steps replayed op by op.
        seed: of every key and of the random params.
        speed_seconds: time spent measuring steps/s (0: not measured).
        reference_env: a gymnasium env to compare with (optional);
            ``sync_state`` (``check_conformance``'s) is then required for
            the step-by-step comparison over ``reference_steps`` steps;
            ``reset_samples`` resets of each are compared.

    Returns:
        An ``EnvReport``; ``report.ok`` when every check passed.
    """
    params = env.default_params() if params is None else params
    name = name or getattr(env, "name", type(env).__name__)
    results, traced = static_checks(env, params)
    if traced is not None:
        results[-1] = _no_float64_x64(env, params, results[-1])
    if not all(r.ok for r in results):
        note = "rollout checks skipped: fix the failures above first"
        return EnvReport(name, tuple(results), note=note)
    rollouts = Rollouts(env, num_envs, num_steps)
    results += _dynamic(env, params, rollouts, seed, random_sets, eager_steps)
    sps, setup = None, ""
    compiled = next(r.ok for r in results if r.name == "jit and vmap")
    if speed_seconds > 0 and compiled:
        sps = rollouts.steps_per_second(params, seed, speed_seconds)
        setup = (
            f"jit(vmap) of {num_envs} envs × {num_steps} steps, random actions, "
            f"resets included; {jax.devices()[0].platform}"
        )
    if reference_env is not None:
        results += _reference(
            env, params, reference_env, sync_state, reference_steps, reset_samples, seed
        )
    return EnvReport(name, tuple(results), sps, setup)


def _reference(env, params, reference_env, sync_state, steps, samples, seed):
    from ondevice_rl.checks.reference import (
        compare_spaces,
        conformance,
        reset_distribution,
    )

    results = [compare_spaces(env, params, reference_env)]
    results.append(reset_distribution(env, params, reference_env, samples, seed))
    if sync_state is None:
        results.append(
            CheckResult("conformance", False, "needs a sync_state function (--sync)")
        )
    else:
        try:
            results.append(
                conformance(env, params, reference_env, sync_state, steps, seed)
            )
        except Exception as e:
            results.append(CheckResult("conformance", False, raised("the sync", e)))
    return results


__all__ = ["CheckResult", "EnvCheckError", "EnvReport", "check_env", "require_static"]
