"""``train/bench/flops.py``: matmul FLOPs counted from a jaxpr, checked against
hand-worked counts."""

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.cpu.layers import dense_matmul
from ondevice_rl.train.bench.flops import FlopCount, matmul_flops, matmul_peak

X, W = jnp.ones((3, 4)), jnp.ones((4, 5))
ONE_DOT = 2 * 3 * 5 * 4  # [3, 4] @ [4, 5]


def test_a_dot_a_scan_and_a_population():
    assert matmul_flops(jnp.matmul, X, W) == FlopCount(ONE_DOT, 0)

    def scanned(xs, w):  # xs [5, 3, 4]
        return jax.lax.scan(lambda c, x: (c, x @ w), 0.0, xs)[1]

    xs = jnp.ones((5, 3, 4))
    assert matmul_flops(scanned, xs, W).flops == 5 * ONE_DOT
    population = jax.vmap(scanned, in_axes=(None, 0))
    assert matmul_flops(population, xs, jnp.ones((7, 4, 5))).flops == 7 * 5 * ONE_DOT


def test_the_gradient_is_counted_and_the_custom_one_matches_autodiff():
    def loss(w, matmul):
        return jnp.sum(jnp.tanh(matmul(X, w)))

    # Forward [3,4]@[4,5]; backward dW = X^T g: [4,3]@[3,5], the same count.
    plain = matmul_flops(jax.grad(lambda w: loss(w, jnp.matmul)), W)
    assert plain.flops == 2 * ONE_DOT
    custom = matmul_flops(jax.grad(lambda w: loss(w, dense_matmul)), W)
    assert custom.flops == plain.flops  # platform branches count once


def test_cond_counts_its_costliest_branch_and_while_is_flagged():
    def either(p, x, w):
        return jax.lax.cond(p, lambda: x @ w @ jnp.ones((5, 5)), lambda: x @ w)

    assert matmul_flops(either, True, X, W).flops == ONE_DOT + 2 * 3 * 5 * 5

    def loop(x, w):
        return jax.lax.while_loop(
            lambda c: c[1] < 3, lambda c: (c[0], c[1] + 1), (x @ w, 0)
        )

    assert matmul_flops(loop, X, W) == FlopCount(ONE_DOT, 1)


def test_a_convolution():
    images, kernel = jnp.ones((1, 5, 5, 2)), jnp.ones((3, 3, 2, 4))

    def conv(x, k):
        dims = ("NHWC", "HWIO", "NHWC")
        return jax.lax.conv_general_dilated(
            x, k, (1, 1), "VALID", dimension_numbers=dims
        )

    assert matmul_flops(conv, images, kernel).flops == 2 * (3 * 3 * 4) * (3 * 3 * 2)


def test_the_peak_is_a_finite_rate():
    peak = matmul_peak(size=64, repeats=1)
    assert np.isfinite(peak) and peak > 0
