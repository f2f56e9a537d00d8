"""``check_env``: the checks this project runs on its own environments, for
any environment following the protocol (``ondevice_rl.env.types``).

    from ondevice_rl import make
    from ondevice_rl.checks.check_env import check_env

    env, params = make("CartPole-v1")
    report = check_env(env, params)
    print(report)          # one line per check, pass or fail, and steps/s
    assert report.ok

It runs five stages, each a module of this package called once, in order
(numbered in ``check_env``'s body):

1. ``static``: nothing compiled. Declared spaces, params with ``max_steps``,
   reset's and step's shapes and dtypes against the spaces, the state's types
   kept, no float64 (also with ``jax_enable_x64``). A failure here stops the
   checks.
2. ``rollouts``: one compiled ``jit(vmap)`` rollout with the default params:
   episodes start at time 0, ``step`` never resets, truncation exactly at
   ``max_steps``, finite values, observations within their space; its
   steps/s.
3. ``params``: the same program with a second time limit and random
   in-range params (never recompiling): the stage-2 checks over every set,
   termination independent of the time limit.
4. ``eager``: same key → same trajectory, jitted steps equal to op-by-op ones.
5. ``reference`` (with a gymnasium ``reference_env``): spaces, the reset
   distribution and step-by-step conformance (``check_conformance``).
"""

from dataclasses import dataclass
from typing import Any

from ondevice_rl.checks.eager import eager_checks
from ondevice_rl.checks.params import params_checks
from ondevice_rl.checks.reference import SyncFn, reference_checks
from ondevice_rl.checks.report import CheckResult
from ondevice_rl.checks.rollouts import default_rollout
from ondevice_rl.checks.static import static_checks


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
    sync_state: SyncFn | None = None,
    reference_steps: int = 2000,
    reset_samples: int = 2000,
) -> EnvReport:
    """Checks ``env`` (unwrapped; ``params``: its defaults if None).

    Args:
        name: shown in the report (default ``env.name``).
        num_envs, num_steps: the rollout's batch ``B`` and length ``T``.
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
    results, _ = static_checks(env, params)  # 1
    if not all(r.ok for r in results):
        note = "rollout checks skipped: fix the failures above first"
        return EnvReport(name, tuple(results), note=note)
    default = default_rollout(env, params, num_envs, num_steps, seed, speed_seconds)
    results.append(default.compiled)  # 2
    if default.rollout is not None:
        results += params_checks(env, params, default, seed, random_sets)  # 3
        results += eager_checks(default, params, seed, eager_steps)  # 4
    if reference_env is not None:
        results += reference_checks(  # 5
            env, params, reference_env, sync_state, reference_steps, reset_samples, seed
        )
    return EnvReport(
        name, tuple(results), default.steps_per_second, default.speed_setup
    )
