"""What a check reports, and how it names what it saw: ``CheckResult`` (one
line of a report), ``EnvCheckError`` (a one-line failure), an exception's
first line with a hint for JAX's tracer errors, paths of pytree leaves,
``float32[4]``-style shapes (of a leaf or a pytree) and short names of
spaces."""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.env.spaces import Box, Discrete

#: JAX's errors for Python control flow or NumPy on traced values.
TRACER_ERRORS = (
    jax.errors.ConcretizationTypeError,
    jax.errors.TracerBoolConversionError,
    jax.errors.TracerIntegerConversionError,
    jax.errors.TracerArrayConversionError,
)
TRACER_HINT = (
    " (Python control flow or NumPy on a traced value: use jnp.where, "
    "lax.cond or lax.select, and jnp instead of np)"
)


class CheckResult(NamedTuple):
    """One line of a report: ``name``, whether it passed, and what was seen."""

    name: str
    ok: bool
    detail: str


class EnvCheckError(ValueError):
    """An environment breaking the protocol (one-line message)."""


def raised(what: str, error: Exception) -> str:
    """``"<what> raised <Error>: <first line>"`` with a hint for tracer errors."""
    lines = str(error).strip().splitlines()
    text = f"{what} raised {type(error).__name__}" + (f": {lines[0]}" if lines else "")
    return text + (TRACER_HINT if isinstance(error, TRACER_ERRORS) else "")


def leaves_with_paths(tree: Any, prefix: str) -> list[tuple[str, Any]]:
    """``[(prefix + ".field[0]...", leaf)]``."""
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    return [(prefix + jax.tree_util.keystr(path), leaf) for path, leaf in flat]


def aval(x: Any, weak: bool = True) -> str:
    """``float32[4]`` (`` weak`` added for Python-scalar types if ``weak``)."""
    dtype = getattr(x, "dtype", None)  # key<fry> for PRNG keys
    name = str(dtype) if dtype is not None else jnp.dtype(jnp.result_type(x)).name
    weak = " weak" if weak and getattr(x, "weak_type", False) else ""
    return f"{name}{list(np.shape(x))}{weak}"


def aval_tree(tree: Any) -> str:
    """``float32[4]`` for one leaf, ``{['a']: int32[], ...}`` for a pytree."""
    leaves = jax.tree.leaves(tree)
    if len(leaves) == 1:
        return aval(leaves[0])
    return (
        "{" + ", ".join(f"{p}: {aval(x)}" for p, x in leaves_with_paths(tree, "")) + "}"
    )


def describe_space(space: Discrete | Box) -> str:
    """``Discrete(6)`` or ``Box(float32[4])``."""
    if isinstance(space, Discrete):
        return f"Discrete({int(space.n)})"
    kind = ", categorical" if getattr(space, "categorical", False) else ""
    return f"Box({jnp.dtype(space.dtype).name}{list(space.shape)}{kind})"
