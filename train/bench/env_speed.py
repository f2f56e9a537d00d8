"""``bench env``: random-policy environment steps per second.

Each measurement is one jitted ``lax.scan`` of ``N`` steps of ``B`` environments
``EpisodeStats(AutoReset(env))`` (vmapped over the batch; one PRNG split per
step for the whole batch, per-env keys only for the environments' own
randomness). Reported: ``B * N / t`` for the best of ``REPEATS`` executions
after one warm-up. The reset of the batch is a program of its own, run
before and not timed (a Craftax world costs about 19 of its steps); compile
time is measured apart.

``--compare`` adds, for CartPole, gymnax's own auto-resetting ``env.step``
vmapped the way gymnax users write it, and gymnasium's synchronous vector env
stepping on the host with random actions; and for every env of a JAX suite
(Craftax, Navix, ...), the suite's own auto-resetting step
(``train/bench/suite_speed.py``), at the suites' batch sizes (default up to
4096).
"""

import time
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl import envs
from ondevice_rl.env.spaces import Discrete
from ondevice_rl.env.wrappers import AutoReset, EpisodeStats
from ondevice_rl.train.bench import suite_speed

DEFAULT_BATCHES = (1, 64, 1024, 4096, 16384)
QUICK_BATCHES = (1, 1024)
#: The batch size at which ``bench env`` prints our CartPole vs gymnax's.
COMPARE_BATCH = 4096
REPEATS = 3
#: The shortest scan of a JAX suite's env (Craftax's own step at 4,096 envs
#: regenerates 4,096 worlds per step: about 10 s each here).
MIN_SUITE_STEPS = 4
OURS = ("CartPole-v1", "Acrobot-v1", "MountainCar-v0")
OURS += ("MountainCarContinuous-v0", "Pendulum-v1")
QUICK_ENVS = ("CartPole-v1", "gymnax/CartPole-v1")
#: brax envs benchmarked by default when brax is installed (each batch size
#: compiles for ~10 s or more on CPU; others with --envs).
BRAX = ("brax/inverted_pendulum", "brax/ant")


def default_envs(quick: bool) -> tuple[str, ...]:
    """Our ports, their gymnax adapters, ``BRAX`` and one env of each JAX
    suite (``suite_speed.SUITE_ENVS``) if installed."""
    if quick:
        return QUICK_ENVS
    adapters = tuple(n for n in envs.names() if n.startswith("gymnax/"))
    brax = tuple(n for n in BRAX if n in envs.names())
    return OURS + adapters + brax + suite_speed.installed_suite_envs()


def num_steps_for(batch: int, quick: bool, name: str = "") -> int:
    """Scan length giving ~2M env steps (64K quick; 32× fewer for brax, and
    ``suite_speed.scan_shrink`` times fewer for a JAX suite, whose shortest
    scans are as many times shorter, down to ``MIN_SUITE_STEPS``)."""
    target, low, high = (2**16, 16, 2048) if quick else (2**21, 64, 16384)
    if name.startswith("brax/"):
        target, high = target // 32, high // 32
    elif suite_speed.has_native(name):
        shrink = suite_speed.scan_shrink(name)
        target, high = target // shrink, high // shrink
        low = max(MIN_SUITE_STEPS, low // shrink)
    return int(np.clip(target // batch, low, high))


def _actions(space: Any, key: jax.Array, batch: int) -> jax.Array:
    """``[B]`` int32 or ``[B, *shape]`` float32 uniform random actions."""
    if isinstance(space, Discrete):
        return jax.random.randint(key, (batch,), 0, space.n, jnp.int32)
    low = jnp.asarray(space.low, jnp.float32)
    high = jnp.asarray(space.high, jnp.float32)
    u = jax.random.uniform(key, (batch, *space.shape))
    return low + u * (high - low)


def _timed(init: Callable, scan: Callable, seed: int, steps: int, batch: int) -> dict:
    """Compiles ``init(key) -> carry`` and ``scan(carry) -> carry`` apart,
    runs ``init`` once, warms ``scan`` up on its carry, and returns the best
    of ``REPEATS`` timings of ``scan`` alone."""
    key = jax.random.PRNGKey(seed)
    t0 = time.perf_counter()
    start = jax.jit(init).lower(key).compile()
    compiled = jax.jit(scan).lower(jax.eval_shape(init, key)).compile()
    compile_s = time.perf_counter() - t0
    carry = jax.block_until_ready(start(key))
    jax.block_until_ready(compiled(carry))  # warm-up
    best = float("inf")
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        end = jax.block_until_ready(compiled(carry))
        best = min(best, time.perf_counter() - t0)
    episodes = int(end[-1])
    return dict(
        batch=batch,
        steps=steps,
        compile_s=round(compile_s, 3),
        run_s=round(best, 5),
        sps=batch * steps / best,
        episodes=episodes,
    )


def _random_policy(reset, step_done, space, params, batch, steps, seed) -> dict:
    """Times ``steps`` random-policy steps of ``batch`` envs in one ``lax.scan``.

    ``reset(key, params) -> carry`` and ``step_done(key, carry, action, params)
    -> (carry, done)`` are unbatched; they are vmapped here. The carry holds
    the state and the observation (a policy reads it, so no implementation
    may let XLA drop it), and each step's ``[B]`` done flags, as a rollout
    stores them: summed only, they let XLA:CPU recompute an env's whole step
    inside every kernel that reads them (pgx's MinAtar: its sticky-action
    draw in 23 kernels instead of 8). One key split per step for the batch,
    then one key per env.
    """
    batch_reset = jax.vmap(reset, in_axes=(0, None))
    batch_step = jax.vmap(step_done, in_axes=(0, 0, 0, None))

    def init(key):
        state = batch_reset(jax.random.split(key, batch), params)
        return state, key, jnp.zeros((batch,), jnp.bool_), jnp.int32(0)

    def scan(carry):
        def body(carry, _):
            state, key, _, episodes = carry
            key, act_key, env_key = jax.random.split(key, 3)
            state, done = batch_step(
                jax.random.split(env_key, batch),
                state,
                _actions(space, act_key, batch),
                params,
            )
            return (state, key, done, episodes + done.sum(dtype=jnp.int32)), None

        return jax.lax.scan(body, carry, None, length=steps)[0]

    return _timed(init, scan, seed, steps, batch)


def bench_ours(name: str, batch: int, steps: int, seed: int = 0) -> dict:
    """``EpisodeStats(AutoReset(env))`` from our registry (ports, adapters)."""
    base, params = envs.make(name)
    env = EpisodeStats(AutoReset(base))

    def reset(key, params):
        obs, state = env.reset(key, params)
        return state, obs

    def step_done(key, carry, action, params):
        ts = env.step(key, carry[0], action, params)
        return (ts.state, ts.obs), ts.info["episode_done"]

    result = _random_policy(
        reset, step_done, env.action_space(params), params, batch, steps, seed
    )
    impl = "adapter" if "/" in name else "ondevice_rl"
    return dict(env=name, impl=impl, **result)


def bench_suite(name: str, batch: int, steps: int, seed: int = 0) -> dict:
    """The suite's own auto-resetting step for our env ``name``
    (``suite_speed.native_step``), timed as ``bench_ours`` times ours."""
    adapter, params = envs.make(name)
    reset, step_done, native_params = suite_speed.native_step(name)
    space = adapter.action_space(params)
    result = _random_policy(reset, step_done, space, native_params, batch, steps, seed)
    return dict(env=suite_speed.suite_row_name(name), impl="suite", **result)


def bench_gymnax(gymnax_id: str, batch: int, steps: int, seed: int = 0) -> dict:
    """gymnax's own ``env.step`` (auto-resets, splits the key per env), vmapped."""
    # lazy: gymnax pulls in pandas, matplotlib (3 s), which `--help` does not need
    import gymnax

    genv, params = gymnax.make(gymnax_id)
    space = genv.action_space(params)
    space = Discrete(int(space.n)) if hasattr(space, "n") else space

    def reset(key, params):
        obs, state = genv.reset(key, params)
        return state, obs

    def step_done(key, carry, action, params):
        obs, state, _, term, trunc, _ = genv.step(key, carry[0], action, params)
        return (state, obs), term | trunc

    result = _random_policy(reset, step_done, space, params, batch, steps, seed)
    return dict(env=f"{gymnax_id} (gymnax env.step)", impl="gymnax", **result)


def bench_gymnasium(gym_id: str, batch: int, budget_s: float, seed: int = 0) -> dict:
    """gymnasium's sync vector env on the host, random actions, ``budget_s`` s."""
    import gymnasium  # lazy: 0.1 s, which `--help` does not need

    vec = gymnasium.make_vec(gym_id, num_envs=batch, vectorization_mode="sync")
    vec.reset(seed=seed)
    vec.action_space.seed(seed)
    for _ in range(2):
        vec.step(vec.action_space.sample())
    steps, t0 = 0, time.perf_counter()
    while steps < 3 or time.perf_counter() - t0 < budget_s:
        vec.step(vec.action_space.sample())
        steps += 1
    elapsed = time.perf_counter() - t0
    vec.close()
    return dict(
        env=f"{gym_id} (gymnasium sync, host)",
        impl="gymnasium",
        batch=batch,
        steps=steps,
        compile_s=0.0,
        run_s=round(elapsed, 5),
        sps=batch * steps / elapsed,
        episodes=None,
    )


def _guard(fn: Callable[[], dict], name: str, impl: str, batch: int) -> dict:
    """Runs one measurement; an out-of-memory becomes a skipped row."""
    try:
        return fn()
    except Exception as e:  # XlaRuntimeError has no stable import path
        if "RESOURCE_EXHAUSTED" not in str(e) and not isinstance(e, MemoryError):
            raise
        return dict(env=name, impl=impl, batch=batch, sps=None, skipped="out of memory")


def run_env_bench(
    names: tuple[str, ...],
    batches: tuple[int, ...],
    compare: bool,
    quick: bool,
    log: Callable[[str], None] = print,
    suite_batches: tuple[int, ...] | None = None,
    measured: Callable[[list[dict]], None] = lambda rows: None,
) -> dict:
    """All measurements: ``{"results": [row, ...], "ratio_vs_gymnax": {B: x},
    "ratio_vs_suite": {env: {B: x}}}``; ``measured(rows)`` after each env
    and batch's row, ours and the suite's (a run cut short keeps them).

    ``ratio_vs_gymnax[B]`` is ours / gymnax's own CartPole steps per second;
    ``ratio_vs_suite[env][B]`` ours / the suite's own auto-resetting step
    (with ``compare``). The JAX suites' envs run at ``suite_batches``
    (default ``batches``).
    """
    rows, suite_rows = [], []
    for name in names:
        native = suite_speed.has_native(name)
        for batch in (suite_batches or batches) if native else batches:
            steps = num_steps_for(batch, quick, name)
            log(f"env {name} × {batch} ({steps} steps)")
            fn = partial(bench_ours, name, batch, steps)
            rows.append(_guard(fn, name, "ondevice_rl", batch))
            measured(rows + suite_rows)
            if compare and native:
                log(f"env {name} × {batch}: the suite's own auto-reset")
                fn = partial(bench_suite, name, batch, steps)
                row = suite_speed.suite_row_name(name)
                suite_rows.append(_guard(fn, row, "suite", batch))
                measured(rows + suite_rows)
    rows += suite_rows
    by_suite = {}
    for name in names:
        if compare and suite_speed.has_native(name):
            theirs = _series(rows, suite_speed.suite_row_name(name))
            ours = _series(rows, name)
            by_suite[name] = {b: ours[b] / theirs[b] for b in ours if b in theirs}
    ratios = {}
    if compare:
        budget = 0.3 if quick else 1.5
        for batch in batches:
            steps = num_steps_for(batch, quick)
            log(f"env gymnax CartPole-v1 × {batch}; gymnasium × {batch}")
            fn = partial(bench_gymnax, "CartPole-v1", batch, steps)
            rows.append(_guard(fn, "CartPole-v1 (gymnax env.step)", "gymnax", batch))
            rows.append(bench_gymnasium("CartPole-v1", batch, budget))
        ours = _series(rows, "CartPole-v1")
        theirs = _series(rows, "CartPole-v1 (gymnax env.step)")
        ratios = {
            b: ours[b] / theirs[b] for b in batches if ours.get(b) and theirs.get(b)
        }
    return dict(
        results=rows,
        ratio_vs_gymnax=ratios,
        ratio_vs_suite=by_suite,
        compare_batch=COMPARE_BATCH,
    )


def _series(rows: list[dict], env: str) -> dict[int, float]:
    return {r["batch"]: r["sps"] for r in rows if r["env"] == env and r["sps"]}
