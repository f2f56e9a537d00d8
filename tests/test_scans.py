"""``stacked_scan``: a scan's outputs stacked per leaf on CPU and packed per
dtype elsewhere, the same values either way; packed, one write per dtype
instead of one per leaf. (That the GPU program packs, one CUDA graph per
rollout step, is tests/test_launches.py's.)"""

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.scans import packed_scan, stacked_scan


def _step(carry):
    x, key = carry
    key, sub = jax.random.split(key)
    noise = jax.random.uniform(sub, (3, 4), minval=-1.0)  # exact under any fusion
    out = dict(
        obs=x + noise,  # f32 [3, 4]
        reward=jnp.sum(noise, axis=1),  # f32 [3]
        action=jnp.argmax(noise, axis=1).astype(jnp.int32),  # i32 [3]
        done=noise[:, 0] > 0,  # bool [3]
        scalar=jnp.float32(1.5) * x[0, 0],  # f32 []
        typed_key=jax.random.key(7),  # an extended dtype, stacked alone
    )
    return (x + 1.0, key), out


def _init():
    return (jnp.zeros((3, 4)), jax.random.PRNGKey(0))


def test_packed_outputs_equal_the_per_leaf_scan_bitwise():
    plain = jax.jit(lambda c: jax.lax.scan(lambda c, _: _step(c), c, None, 5))
    packed = jax.jit(lambda c: packed_scan(_step, c, 5))
    (end_a, key_a), out_a = plain(_init())
    (end_b, key_b), out_b = packed(_init())
    np.testing.assert_array_equal(end_a, end_b)
    for name in ("obs", "reward", "action", "done", "scalar"):
        assert out_a[name].dtype == out_b[name].dtype, name
        assert out_a[name].shape == out_b[name].shape == (5, *out_a[name].shape[1:])
        np.testing.assert_array_equal(out_a[name], out_b[name], err_msg=name)
    np.testing.assert_array_equal(
        jax.random.key_data(out_a["typed_key"]), jax.random.key_data(out_b["typed_key"])
    )


def test_on_cpu_it_is_the_plain_scan():
    a = jax.jit(lambda c: stacked_scan(_step, c, 4))(_init())
    b = jax.jit(lambda c: jax.lax.scan(lambda c, _: _step(c), c, None, 4))(_init())
    np.testing.assert_array_equal(a[1]["obs"], b[1]["obs"])


def _stacking_writes(fn) -> int:
    """Dynamic-update-slices in ``fn``'s optimised CPU program."""
    text = jax.jit(fn).lower(_init()).compile().as_text()
    return text.count("dynamic-update-slice(")


def test_packed_it_writes_one_array_per_dtype():
    # Six leaves: three dtypes packed (f32, i32, bool), the key alone.
    per_leaf = _stacking_writes(
        lambda c: jax.lax.scan(lambda c, _: _step(c), c, None, 4)
    )
    packed = _stacking_writes(lambda c: packed_scan(_step, c, 4))
    assert packed == 4 < per_leaf, (packed, per_leaf)
