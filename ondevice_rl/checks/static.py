"""Stage 1 of ``check_env``: the static checks, nothing compiled, nothing run.

``static_checks`` reads, in this order: the declared spaces, the params, then
``reset`` and ``step`` traced by ``jax.eval_shape``. The observation must
match the observation space (shape, dtype; integer dtypes where declared; a
dict or tuple of spaces for pytree observations), the reward be ``[]``
float32, the flags ``[]`` bool, the state keep one type from ``reset`` to
``step`` (a ``lax.scan`` carry) and count its steps in an int32 ``time``, the
params hold the time limit ``max_steps``, and nothing be float64, also when
traced again under ``jax_enable_x64`` (where default dtypes widen). An action
mask, ``[A]`` bool for ``Discrete(A)`` actions, is a dict observation's
``"action_mask"`` entry (``ondevice_rl.env.masks``); one given only as
``info["action_mask"]`` is refused, since learners need it at reset too. A
categorical ``Box`` holds indices: an integer dtype, ``low`` 0.

``require_static`` raises the first failure as one line: learners call it
before compiling (without the ``jax_enable_x64`` trace).
"""

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.checks.report import (
    CheckResult,
    EnvCheckError,
    aval,
    aval_tree,
    describe_space,
    leaves_with_paths,
    raised,
)
from ondevice_rl.env.masks import ACTION_MASK, split_action_mask
from ondevice_rl.env.spaces import Box, Discrete

F64 = jnp.dtype(jnp.float64)


class Traced(NamedTuple):
    """What ``eval_shape`` found (``ShapeDtypeStruct`` leaves)."""

    obs_space: Any
    action_space: Discrete | Box
    obs: Any  # reset's observation
    state: Any  # reset's state
    step: Any  # step's TimeStep


def is_space(x: Any) -> bool:
    return isinstance(x, (Box, Discrete))


def _float64_paths(tree: Any, prefix: str) -> list[str]:
    """Paths of the float64 leaves (arrays only; Python floats are weak)."""
    return [
        path
        for path, leaf in leaves_with_paths(tree, prefix)
        if str(getattr(leaf, "dtype", "")) == "float64"
    ]


def _obs_problem(obs: Any, space: Any, where: str) -> str | None:
    """Why ``obs`` (arrays or ShapeDtypeStructs) does not match ``space``."""
    spaces, tree = jax.tree.flatten(space, is_leaf=is_space)
    try:
        leaves = tree.flatten_up_to(obs)
    except (ValueError, TypeError):
        return (
            f"{where}'s observation is {jax.tree.structure(obs)}, the observation "
            f"space says {tree}"
        )
    named = leaves_with_paths(jax.tree.unflatten(tree, leaves), "obs")
    for (path, leaf), leaf_space in zip(named, spaces, strict=True):
        shape, dtype = tuple(np.shape(leaf)), jnp.dtype(jnp.result_type(leaf))
        if shape != tuple(leaf_space.shape):
            return (
                f"{where}'s {path} has shape {list(shape)}, the observation space "
                f"says {list(leaf_space.shape)}"
            )
        if dtype != jnp.dtype(leaf_space.dtype):
            return (
                f"{where}'s {path} is {dtype.name}, the observation space says "
                f"{jnp.dtype(leaf_space.dtype).name}"
            )
    return None


def _scalar_problem(x: Any, name: str, dtype: Any) -> str | None:
    if tuple(np.shape(x)) != () or jnp.result_type(x) != jnp.dtype(dtype):
        return f"step's {name} is {aval(x)}, not {jnp.dtype(dtype).name}[]"
    return None


def _count(tree: Any, one: str, many: str) -> str:
    n = len(jax.tree.leaves(tree))
    return f"{n} {one if n == 1 else many}"


def _check(name: str, fn: Callable[[], str]) -> CheckResult:
    """Runs ``fn`` (the detail of a pass; raises EnvCheckError on a failure)."""
    try:
        return CheckResult(name, True, fn())
    except EnvCheckError as e:
        return CheckResult(name, False, str(e))


def _spaces(env: Any, params: Any) -> tuple[Any, Any, str]:
    try:
        obs_space = env.observation_space(params)
        act_space = env.action_space(params)
    except Exception as e:
        raise EnvCheckError(raised("a space method", e)) from e
    leaves = jax.tree.leaves(obs_space, is_leaf=is_space)
    if not leaves or not all(is_space(s) for s in leaves):
        raise EnvCheckError(
            f"observation_space returned {type(obs_space).__name__}, not a Box or "
            "Discrete (or a dict/tuple of them) from ondevice_rl.env.spaces"
        )
    if not is_space(act_space):
        raise EnvCheckError(
            f"action_space returned {type(act_space).__name__}, not a Box or "
            "Discrete from ondevice_rl.env.spaces"
        )
    for what, space in [*(("observation", s) for s in leaves), ("action", act_space)]:
        if jnp.dtype(space.dtype) == F64:
            raise EnvCheckError(f"the {what} space is float64 (use float32)")
    for space in leaves:
        problem = isinstance(space, Box) and space.categorical_problem()
        if problem:
            raise EnvCheckError(f"the categorical {describe_space(space)} {problem}")
    if isinstance(act_space, Discrete) and int(act_space.n) < 1:
        raise EnvCheckError(f"action space Discrete({act_space.n}) has no action")
    if isinstance(act_space, Box) and jnp.dtype(act_space.dtype) != jnp.float32:
        raise EnvCheckError(f"the Box action space is {act_space.dtype}, not float32")
    shapes = ", ".join(describe_space(s) for s in leaves)
    return (
        obs_space,
        act_space,
        f"observation {shapes}; action {describe_space(act_space)}",
    )


def _params(params: Any) -> str:
    limit = getattr(params, "max_steps", None)
    if limit is None:
        raise EnvCheckError(
            f"params ({type(params).__name__}) have no max_steps, the time limit"
        )
    if np.shape(limit) != () or not jnp.issubdtype(jnp.result_type(limit), jnp.integer):
        raise EnvCheckError(f"params.max_steps is {aval(limit)}, not an int32 scalar")
    if not 1 <= int(limit) < 2**31:
        raise EnvCheckError(f"params.max_steps is {int(limit)}, not in [1, 2^31)")
    wide = _float64_paths(params, "params")
    if wide:
        raise EnvCheckError(f"float64 params: {', '.join(wide)} (use float32)")
    return f"max_steps {int(limit)}, {_count(params, 'leaf', 'leaves')}"


def _state_problem(reset_state: Any, step_state: Any) -> str | None:
    before, after = jax.tree.structure(reset_state), jax.tree.structure(step_state)
    if before != after:
        return f"step's state is {after}, reset's {before}"
    pairs = zip(
        leaves_with_paths(reset_state, "state"),
        jax.tree.leaves(step_state),
        strict=True,
    )
    for (path, a), b in pairs:  # weak types may differ: lax.scan promotes them
        if aval(a, weak=False) != aval(b, weak=False):
            return (
                f"{path} is {aval(a)} after reset but {aval(b)} after step "
                "(a lax.scan carry keeps one type)"
            )
    time = getattr(reset_state, "time", None)
    if time is None or aval(time) != "int32[]":
        seen = "missing" if time is None else aval(time)
        return f"state.time (int32[], steps taken this episode) is {seen}"
    return None


def _mask_problem(obs: Any, info: Any, act_space: Any) -> str | None:
    """Why the action mask (``obs["action_mask"]``; ``info`` is not read by
    learners) is not ``[A]`` bool for ``Discrete(A)`` actions."""
    mask = split_action_mask(obs)[1]
    if mask is None:
        if isinstance(info, Mapping) and ACTION_MASK in info:
            return (
                'info["action_mask"] is not read by learners: give the mask as '
                'the observation\'s "action_mask" entry (a dict observation)'
            )
        return None
    if not isinstance(act_space, Discrete):
        return "an action mask needs a Discrete action space"
    if aval(mask) != f"bool[{int(act_space.n)}]":
        return f"the action mask is {aval(mask)}, not bool[{int(act_space.n)}]"
    return None


def _trace(env: Any, params: Any) -> Traced:
    """``eval_shape`` of ``reset`` and of ``step`` from its state, with an
    action of the action space's shape (EnvCheckError, one line, if either
    raises or returns the wrong kind of thing)."""
    obs_space, act_space, _ = _spaces(env, params)
    key = jax.random.key(0)
    try:
        out = jax.eval_shape(env.reset, key, params)
    except Exception as e:
        raise EnvCheckError(raised("reset", e)) from e
    if not (isinstance(out, tuple) and len(out) == 2):
        raise EnvCheckError(f"reset returned {type(out).__name__}, not (obs, state)")
    obs, state = out
    action = jax.ShapeDtypeStruct(tuple(act_space.shape), jnp.dtype(act_space.dtype))
    try:
        step = jax.eval_shape(env.step, key, state, action, params)
    except Exception as e:
        raise EnvCheckError(raised("step", e)) from e
    fields = ("obs", "state", "reward", "terminated", "truncated", "info")
    if not all(hasattr(step, f) for f in fields):
        raise EnvCheckError(
            f"step returned {type(step).__name__}, not a TimeStep ({', '.join(fields)})"
        )
    return Traced(obs_space, act_space, obs, state, step)


def _reset(traced: Traced) -> str:
    problem = _obs_problem(traced.obs, traced.obs_space, "reset")
    if problem:
        raise EnvCheckError(problem)
    state = _count(traced.state, "array", "arrays")
    return f"obs {aval_tree(traced.obs)}, state of {state}"


def _step(traced: Traced) -> str:
    ts = traced.step
    problem = (
        _obs_problem(ts.obs, traced.obs_space, "step")
        or _scalar_problem(ts.reward, "reward", jnp.float32)
        or _scalar_problem(ts.terminated, "terminated", jnp.bool_)
        or _scalar_problem(ts.truncated, "truncated", jnp.bool_)
        or (None if isinstance(ts.info, Mapping) else "step's info is not a dict")
        or _state_problem(traced.state, ts.state)
        or _mask_problem(ts.obs, ts.info, traced.action_space)
    )
    if problem:
        raise EnvCheckError(problem)
    mask = split_action_mask(ts.obs)[1] is not None
    return "reward float32[], flags bool[], state keeps its types" + (
        ", action mask" if mask else ""
    )


def _no_float64(traced: Traced) -> None:
    """Raises EnvCheckError naming the float64 leaves of what ``_trace`` saw."""
    ts = traced.step
    wide = [
        *_float64_paths(traced.obs, "reset obs"),
        *_float64_paths(traced.state, "state"),
        *_float64_paths((ts.obs, ts.reward), "step (obs, reward)"),
        *_float64_paths(ts.info, "info"),
    ]
    if wide:
        more = f" and {len(wide) - 4} more" if len(wide) > 4 else ""
        raise EnvCheckError(f"float64 in {', '.join(wide[:4])}{more} (use float32)")


def _float64(env: Any, params: Any, traced: Traced, under_x64: bool) -> str:
    """No float64 in ``traced``, nor (``under_x64``) in a trace under
    jax_enable_x64, where default dtypes (``jnp.zeros(3)``, ``jnp.array(0.5)``)
    widen. An env that cannot be traced there at all (gymnax's) passes with a
    note."""
    _no_float64(traced)
    seen = "obs, state, reward, info"
    if not under_x64:
        return seen
    with jax.enable_x64(True):
        try:
            wide = _trace(env, params)
        except EnvCheckError as e:
            return f"{seen}; not traceable with jax_enable_x64 ({str(e)[:60]}...)"
        try:
            _no_float64(wide)
        except EnvCheckError as e:
            raise EnvCheckError(
                f"with jax_enable_x64: {e} (give dtypes explicitly, e.g. "
                "jnp.zeros(3, jnp.float32))"
            ) from None
    return f"{seen}; also with jax_enable_x64"


def static_checks(
    env: Any, params: Any, *, under_x64: bool = True
) -> tuple[list[CheckResult], Traced | None]:
    """Every static check (``spaces``, ``params``, ``reset``, ``step``, ``no
    float64``), and what was traced (None if tracing failed).

    Args:
        under_x64: also trace under ``jax_enable_x64`` for "no float64".
    """
    results = [_check("spaces", lambda: _spaces(env, params)[2])]
    results.append(_check("params", lambda: _params(params)))
    if not all(r.ok for r in results):
        return results, None
    try:
        traced = _trace(env, params)
    except EnvCheckError as e:
        failed = "step" if str(e).startswith("step") else "reset"
        return [*results, CheckResult(failed, False, str(e))], None
    results.append(_check("reset", lambda: _reset(traced)))
    results.append(_check("step", lambda: _step(traced)))
    float64 = _check("no float64", lambda: _float64(env, params, traced, under_x64))
    return [*results, float64], traced


def require_static(env: Any, params: Any, name: str) -> None:
    """Raises ``EnvCheckError`` (one line naming ``name`` and the first
    failed check) unless every static check passes."""
    results, _ = static_checks(env, params, under_x64=False)
    for result in results:
        if not result.ok:
            raise EnvCheckError(
                f"environment {name}: {result.detail} "
                f"(`ondevice-rl check-env {name}` runs every check)"
            )
