"""``bench env --compare`` for the JAX suites: our stack beside a suite's own
auto-resetting step in the same harness."""

import jax
import pytest

from ondevice_rl.train.bench import env_speed

pytest.importorskip("pgx")

PGX_MINATAR = "pgx/minatar-breakout"


def _run_compiled(monkeypatch, bench, batch: int, steps: int) -> dict:
    """``bench(name, batch, steps)`` with the harness's timing replaced by one
    run: the compiled scan's HLO text and the episodes it counted."""
    seen = {}

    def once(init, scan, seed, steps, batch):
        key = jax.random.PRNGKey(seed)
        compiled = jax.jit(scan).lower(jax.eval_shape(init, key)).compile()
        end = compiled(jax.jit(init)(key))
        seen.update(hlo=compiled.as_text(), episodes=int(end[-1]))
        return {}

    monkeypatch.setattr(env_speed, "_timed", once)
    bench(PGX_MINATAR, batch, steps)
    return seen


def test_pgx_minatar_ours_and_pgx_auto_reset_play_the_same_episodes(monkeypatch):
    """Same keys, same random policy: our adapter under ``AutoReset`` and
    pgx's ``auto_reset`` end the same number of episodes, and XLA:CPU computes
    pgx's sticky-action draw (Threefry) no more often in ours. The harness
    keeps each step's done flags, as a rollout does; when it only summed
    them, our program recomputed the draw in 23 kernels against pgx's 8."""
    ours = _run_compiled(monkeypatch, env_speed.bench_ours, 4, 64)
    theirs = _run_compiled(monkeypatch, env_speed.bench_suite, 4, 64)
    assert ours["episodes"] == theirs["episodes"] > 0
    assert ours["hlo"].count(" xor(") <= theirs["hlo"].count(" xor(")
