"""Networks: the torso follows the observation's rank (MLP for vectors, CNN
for images), conv kernels initialise without batched QRs, every learner's
policy for a MinAtar env has convolution kernels, and the layers' matmul
(``dense_matmul``) has the plain matmul's values and gradients with the
kernel's gradient laid out as ``x^T g``."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ondevice_rl.networks import ActorCritic, QNetwork, dense_matmul


def _kernels(params):
    """``{path: shape}`` of every kernel in ``params``."""
    flat = jax.tree_util.tree_flatten_with_path(params)[0]
    return {
        jax.tree_util.keystr(path): leaf.shape
        for path, leaf in flat
        if "kernel" in jax.tree_util.keystr(path)
    }


def test_vector_observations_keep_the_mlp_and_its_parameters():
    net = ActorCritic(2, False)
    params = net.init(jax.random.PRNGKey(0), jnp.zeros(4))
    assert all("Conv" not in path for path in _kernels(params))
    same = ActorCritic(2, False, obs_ndim=1, conv=(32, 32))  # conv unused for rank 1
    other = same.init(jax.random.PRNGKey(0), jnp.zeros(4))
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(other), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("conv", [(16,), (16, 32)])
def test_image_observations_go_through_convolutions(conv):
    obs = jnp.ones((10, 10, 4))
    net = ActorCritic(3, False, obs_ndim=3, conv=conv)
    params = net.init(jax.random.PRNGKey(0), obs)
    kernels = _kernels(params)
    convs = sorted(s for p, s in kernels.items() if "Conv" in p)
    assert len(convs) == 2 * len(conv)  # actor and critic torsos
    assert (3, 3, 4, conv[0]) in convs
    side = 10 - 2 * len(conv)  # VALID 3x3 convolutions
    assert any(s[0] == side * side * conv[-1] for s in kernels.values())
    batch = jnp.ones((5, 2, 10, 10, 4))  # [T, B, H, W, C]
    pi = net.apply(params, batch)
    assert pi.logits_or_mean.shape == (5, 2, 3) and pi.value.shape == (5, 2)
    one = net.apply(params, obs)
    np.testing.assert_allclose(one.value, pi.value[0, 0], rtol=1e-5, atol=1e-6)


def test_other_ranks_are_flattened():
    net = QNetwork(3, obs_ndim=2)
    params = net.init(jax.random.PRNGKey(0), jnp.zeros((10, 5)))
    assert net.apply(params, jnp.zeros((7, 10, 5))).shape == (7, 3)


def test_vmapped_conv_init_runs_one_qr_per_member():
    # A batched LAPACK QR under vmap is what deadlocked XLA:CPU (see
    # ondevice_rl.networks.sequential_under_vmap): conv kernels must not use one.
    net = QNetwork(3, obs_ndim=3)
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    init = jax.vmap(lambda k: net.init(k, jnp.zeros((10, 10, 4))))
    text = jax.jit(init).lower(keys).compile().as_text()
    qr_calls = [ln for ln in text.splitlines() if "lapack_sgeqrf" in ln and "=" in ln]
    assert qr_calls
    for line in qr_calls:
        dims = re.search(r"= \(f32\[([\d,]+)\]", line).group(1).split(",")
        assert len(dims) == 2, line
    batched = init(keys)
    single = net.init(keys[1], jnp.zeros((10, 10, 4)))
    for a, b in zip(jax.tree.leaves(batched), jax.tree.leaves(single), strict=True):
        np.testing.assert_allclose(a[1], b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("algo", ["ppo", "a2c", "dqn", "pqn"])
def test_minatar_policies_have_conv_kernels(algo):
    from ondevice_rl.train.kit.registry import get_algorithm

    algorithm = get_algorithm(algo)
    config = algorithm.config(env="gymnax/Breakout-MinAtar")
    trainer = algorithm.make_trainer(config)
    params = trainer.network.init(jax.random.PRNGKey(0), jnp.zeros((10, 10, 4)))
    assert any("Conv" in path and len(s) == 4 for path, s in _kernels(params).items())
    out = trainer.network.apply(params, jnp.zeros((2, 10, 10, 4)))
    values = out if isinstance(out, jax.Array) else out.logits_or_mean
    assert values.shape == (2, 3)


def test_conv3x3_equals_flax_conv():
    import flax.linen as nn

    from ondevice_rl.networks import Conv3x3

    x = jax.random.normal(jax.random.key(1), (5, 10, 10, 4))
    layer = Conv3x3(16)
    params = layer.init(jax.random.key(0), x)
    reference = nn.Conv(16, (3, 3), padding="VALID").apply(params, x)
    np.testing.assert_allclose(layer.apply(params, x), reference, atol=1e-5)


@pytest.mark.parametrize("lead", [(), (7,), (3, 5)])
def test_dense_matmul_values_and_gradients_match_numpy(lead):
    rng = np.random.default_rng(0)
    x = rng.normal(size=lead + (6,)).astype(np.float32)
    kernel = rng.normal(size=(6, 4)).astype(np.float32)
    g = rng.normal(size=lead + (4,)).astype(np.float32)  # cotangent of the output

    def loss(x, kernel):
        return jnp.sum(dense_matmul(x, kernel) * g)

    value = jax.jit(dense_matmul)(x, kernel)
    dx, dkernel = jax.jit(jax.grad(loss, argnums=(0, 1)))(x, kernel)
    np.testing.assert_allclose(value, x @ kernel, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dx, g @ kernel.T, rtol=1e-5, atol=1e-5)
    rows_x, rows_g = x.reshape(-1, 6), g.reshape(-1, 4)
    np.testing.assert_allclose(dkernel, rows_x.T @ rows_g, rtol=1e-5, atol=1e-5)


def test_dense_matmul_gradients_match_autodiff_under_vmap():
    keys = jax.random.split(jax.random.key(0), 3)
    x = jax.random.normal(keys[0], (4, 9, 6))  # [P, M, K]: one batch per member
    kernel = jax.random.normal(keys[1], (4, 6, 5))
    g = jax.random.normal(keys[2], (4, 9, 5))

    def grads(matmul):
        def one(x, kernel, g):
            return jax.grad(lambda x, k: jnp.sum(matmul(x, k) * g), (0, 1))(x, kernel)

        return jax.jit(jax.vmap(one))(x, kernel, g)

    for ours, plain in zip(grads(dense_matmul), grads(jnp.matmul), strict=True):
        np.testing.assert_allclose(ours, plain, rtol=1e-5, atol=1e-5)


def test_kernel_gradient_contracts_a_materialised_transpose():
    # The point of dense_matmul: the kernel's gradient is a dot whose lhs
    # contracts its last axis (x^T materialised behind a barrier), not the
    # leading-axis contraction autodiff emits, which XLA:CPU runs ≈2× slower.
    net = QNetwork(2)
    obs = jnp.ones((128, 4))
    params = net.init(jax.random.key(0), obs[0])
    jaxpr = jax.make_jaxpr(jax.grad(lambda p: jnp.sum(net.apply(p, obs))))(params)
    eqns = jaxpr.jaxpr.eqns
    barriers = [e for e in eqns if e.primitive.name == "optimization_barrier"]
    assert len(barriers) == 3  # one per Dense layer
    contractions = [
        e.params["dimension_numbers"][0]
        for e in eqns
        if e.primitive.name == "dot_general"
    ]
    assert len(contractions) == 3 + 3 + 3  # forward, input and kernel gradients
    assert ((0,), (0,)) not in [tuple(map(tuple, c)) for c in contractions]
