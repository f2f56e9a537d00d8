"""Stage 5 of ``check_env`` (with a reference): a port against the gymnasium
environment it was ported from, in this order:

1. ``spaces``: the action and observation spaces are the reference's.
2. ``resets``: the port's resets and the reference's come from one
   distribution.
3. ``steps``: both step side by side, the reference synced to the port's
   state before every step (``check_conformance``).

``reference_checks`` runs the three for ``check_env``, one line each. The
reference is any gymnasium-style env (``reset(seed=)``, ``step``,
``action_space``, ``observation_space``); nothing here imports gymnasium or
an environment.
"""

from typing import Any

from ondevice_rl.checks.reference.resets import reset_distribution
from ondevice_rl.checks.reference.spaces import compare_spaces
from ondevice_rl.checks.reference.steps import (
    ConformanceReport,
    Mismatch,
    StartStateFn,
    SyncFn,
    check_conformance,
    start_near_time_limit,
)
from ondevice_rl.checks.report import CheckResult, raised


def reference_checks(
    env: Any,
    params: Any,
    reference_env: Any,
    sync_state: SyncFn | None,
    num_steps: int,
    num_resets: int,
    seed: int,
) -> list[CheckResult]:
    """The three comparisons in order, one ``CheckResult`` each: spaces,
    ``num_resets`` resets of each, ``num_steps`` steps (without a
    ``sync_state`` the last fails, saying so)."""
    results = [compare_spaces(env, params, reference_env)]
    results.append(reset_distribution(env, params, reference_env, num_resets, seed))
    if sync_state is None:
        failed = "needs a sync_state function (--sync)"
        return [*results, CheckResult("conformance", False, failed)]
    try:
        report = check_conformance(
            env,
            reference_env,
            sync_state=sync_state,
            params=params,
            num_steps=num_steps,
            seed=seed,
        )
    except Exception as e:
        return [*results, CheckResult("conformance", False, raised("the sync", e))]
    return [*results, CheckResult("conformance", report.ok, report.one_line())]


__all__ = [
    "ConformanceReport",
    "Mismatch",
    "StartStateFn",
    "SyncFn",
    "check_conformance",
    "compare_spaces",
    "reference_checks",
    "reset_distribution",
    "start_near_time_limit",
]
