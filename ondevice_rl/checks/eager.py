"""Stage 4 of ``check_env``: the compiled rollout against the same steps op by op.

``Rollouts.eager`` replays the first steps of environment 0 without ``jit``,
twice, from the keys the compiled rollout gave it (stage 2,
``ondevice_rl.checks.rollouts``). The two replays must be equal (same key,
same trajectory) and equal the compiled steps within float32 rounding:
randomness drawn outside the key (NumPy, Python, a global counter) differs
between the two, or between two eager runs.
"""

from typing import Any

import jax
import numpy as np

from ondevice_rl.checks.report import CheckResult, leaves_with_paths, raised
from ondevice_rl.checks.rollouts import DefaultRollout, Record, Rollout


def _compare(
    eager: list[Record], again: list[Record], rollout: Rollout
) -> list[CheckResult]:
    """ "same key, same trajectory" (``eager`` and ``again``, two replays of
    environment 0) and "jit equals eager" (``eager`` against ``rollout``'s
    ``[B, T, ...]`` records at ``[0, t]``)."""

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


def eager_checks(
    default: DefaultRollout, params: Any, seed: int, steps: int
) -> list[CheckResult]:
    """Replays ``steps`` steps op by op, twice, and compares them with stage
    2's rollout (``default``, run with ``params`` and ``seed``)."""
    try:
        eager = default.rollouts.eager(params, seed, steps)
        again = default.rollouts.eager(params, seed, steps)
    except Exception as e:
        return [CheckResult("jit equals eager", False, raised("op by op", e))]
    return _compare(eager, again, default.rollout)
