"""ε-greedy exploration for the Q-learners, in one unit: env steps."""

import jax
import jax.numpy as jnp


def linear_epsilon(
    env_steps: jax.Array,
    exploration_steps: int,
    eps_start: jax.Array,
    eps_end: jax.Array,
) -> jax.Array:
    """ε after ``env_steps`` env steps ``[]`` float32: linear from
    ``eps_start`` to ``eps_end`` over ``exploration_steps``, then constant."""
    frac = jnp.minimum(env_steps / exploration_steps, 1.0)
    return (eps_start + frac * (eps_end - eps_start)).astype(jnp.float32)


def epsilon_greedy(
    key: jax.Array, q: jax.Array, epsilon: jax.Array, mask: jax.Array | None = None
) -> jax.Array:
    """Actions ``[...]`` int32 from action values ``q`` ``[..., A]``: the
    argmax, or with probability ``epsilon`` a uniform action.

    ``mask`` ``[..., A]`` bool (optional) marks the legal actions: the argmax
    and the uniform draw then range over those only. One uniform draw of
    shape ``[2, ...]`` serves both choices (each random call is a hash to
    compile).
    """
    num_actions = q.shape[-1]
    if mask is not None:
        q = jnp.where(mask, q, -jnp.inf)
    greedy = jnp.argmax(q, axis=-1).astype(jnp.int32)
    u = jax.random.uniform(key, (2,) + greedy.shape)
    explore = u[0] < epsilon
    if mask is None:
        random = jnp.minimum((u[1] * num_actions).astype(jnp.int32), num_actions - 1)
    else:
        # The k-th legal action, k uniform over the number of legal ones.
        legal = jnp.sum(mask, axis=-1)
        k = jnp.minimum((u[1] * legal).astype(jnp.int32), legal - 1)
        random = jnp.argmax(jnp.cumsum(mask, axis=-1) > k[..., None], axis=-1)
        random = random.astype(jnp.int32)
    return jnp.where(explore, random, greedy)
