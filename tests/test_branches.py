"""``cond_or_select``: a conditional on CPU, both branches and a select
off CPU, with ``lax.cond``'s values either way."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ondevice_rl.train.kit.branches import cond_or_select, select_branch


def _branches(x):
    return (lambda: (x * 2.0, jnp.int32(1))), (lambda: (x - 1.0, jnp.int32(0)))


@pytest.mark.parametrize("pred", [True, False])
def test_the_select_has_the_conditionals_values(pred):
    x = jnp.arange(4.0)
    p = jnp.bool_(pred)
    expected = jax.jit(lambda x, p: jax.lax.cond(p, *_branches(x)))(x, p)
    for fn in (select_branch, cond_or_select):
        got = jax.jit(lambda x, p, fn=fn: fn(p, *_branches(x)))(x, p)
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_array_equal(a, b)


def _compiled(fn) -> str:
    args = (jnp.arange(4.0), jnp.bool_(True))
    return jax.jit(lambda x, p: fn(p, *_branches(x))).lower(*args).compile().as_text()


def test_on_cpu_a_conditional_and_the_select_none():
    # (That a GPU program holds no conditional is tests/test_launches.py's.)
    assert " conditional(" in _compiled(cond_or_select)
    assert " conditional(" not in _compiled(select_branch)
