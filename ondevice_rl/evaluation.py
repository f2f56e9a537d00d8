"""Evaluation on the device: ``E`` whole episodes, vmapped, one program.

``evaluate(policy, params, env, env_params, key, episodes, deterministic,
carry)`` resets ``E`` environments and steps them in one ``lax.while_loop`` until
every episode has ended (terminated, or truncated by the env's time limit,
so the loop always ends). A finished episode's state is frozen and its
return and length stop counting (done-masking); so does the policy's carry
(a recurrent policy's state). Pure and host-silent: jit
it, or call it inside a training program.
"""

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def _select(pred: jax.Array, on_true: Any, on_false: Any) -> Any:
    """Per-episode ``where`` over a batched pytree (``pred`` ``[E]``)."""

    def pick(a, b):
        return jnp.where(pred.reshape(pred.shape + (1,) * (a.ndim - 1)), a, b)

    return jax.tree.map(pick, on_true, on_false)


def evaluate(
    policy: Any,
    params: Any,
    env: Any,
    env_params: Any,
    key: jax.Array,
    episodes: int,
    deterministic: bool,
    carry: Any = (),
    keep_state: bool = False,
) -> dict[str, jax.Array]:
    """Runs ``episodes`` episodes of ``policy`` in ``env``.

    Args:
        policy: ``policy(params, carry, obs [E, *obs_shape], key,
            deterministic) -> (env_action [E, ...], carry)`` (a trainer's
            ``policy``).
        env: an environment; wrappers are stripped (``env.unwrapped``) so
            that episodes end instead of restarting.
        env_params: its params (None: its defaults).
        episodes: ``E``, static.
        deterministic: Python bool, passed to ``policy``.
        carry: the policy's carry for ``E`` fresh episodes (``()`` for a
            feed-forward policy).
        keep_state: also return each episode's last env state (``"state"``,
            leaves ``[E, ...]``), e.g. for what a world records in it.

    Returns:
        ``{"return": [E] float32, "length": [E] int32}`` (and ``"state"``).
    """
    env = getattr(env, "unwrapped", env)
    if env_params is None:
        env_params = env.default_params()
    reset_key, key = jax.random.split(key)
    reset = jax.vmap(env.reset, in_axes=(0, None))
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
    obs, state = reset(jax.random.split(reset_key, episodes), env_params)
    done = jnp.zeros((episodes,), jnp.bool_)
    returns = jnp.zeros((episodes,), jnp.float32)
    lengths = jnp.zeros((episodes,), jnp.int32)

    def running(carry):
        return ~jnp.all(carry[2])

    def one_step(loop):
        state, obs, done, returns, lengths, key, carry = loop
        key, act_key, step_key = jax.random.split(key, 3)
        action, next_carry = policy(params, carry, obs, act_key, deterministic)
        ts = step(jax.random.split(step_key, episodes), state, action, env_params)
        active = ~done
        returns = returns + jnp.where(active, ts.reward, 0.0)
        lengths = lengths + active.astype(jnp.int32)
        state = _select(active, ts.state, state)
        obs = _select(active, ts.obs, obs)
        carry = _select(active, next_carry, carry)
        done = done | ts.terminated | ts.truncated
        return state, obs, done, returns, lengths, key, carry

    loop = (state, obs, done, returns, lengths, key, carry)
    state, _, _, returns, lengths, _, _ = jax.lax.while_loop(running, one_step, loop)
    result = {"return": returns, "length": lengths}
    return {**result, "state": state} if keep_state else result


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    """Mean, std, min and max of each ``[E]`` array of ``evaluate``'s result,
    as Python floats, plus ``episodes``."""
    summary: dict[str, Any] = {}
    for name, values in result.items():
        values = np.asarray(values, np.float64)
        summary[name] = {
            "mean": float(values.mean()),
            "std": float(values.std()),
            "min": float(values.min()),
            "max": float(values.max()),
        }
        summary["episodes"] = int(values.shape[0])
    return summary
