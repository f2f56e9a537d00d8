"""Networks: the torso follows the observation's rank (MLP for vectors, CNN
for images), conv kernels initialise without batched QRs on CPU, every
learner's policy for a MinAtar env has convolution kernels, and the layers'
matmul (``dense_matmul``) has the plain matmul's values and gradients. The
CPU-only forms (the kernel's gradient as ``x^T`` behind a barrier, im2col,
one QR per member) are in the program lowered for CPU and not in the one
lowered for a GPU."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ondevice_rl.cpu.layers import dense_matmul
from ondevice_rl.nn.networks import ActorCritic, QNetwork


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
    # ondevice_rl.cpu.layers.sequential_under_vmap): conv kernels must not use one.
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

    from ondevice_rl.cpu.layers import Conv3x3

    x = jax.random.normal(jax.random.key(1), (5, 10, 10, 4))
    layer = Conv3x3(16)
    params = layer.init(jax.random.key(0), x)
    reference = nn.Conv(16, (3, 3), padding="VALID").apply(params, x)
    np.testing.assert_allclose(layer.apply(params, x), reference, atol=1e-5)


def test_conv3x3_gradients_under_vmap_and_scan_equal_flax_conv():
    import flax.linen as nn

    from ondevice_rl.cpu.layers import Conv3x3

    frames = jax.random.normal(jax.random.key(3), (3, 2, 5, 10, 10, 4))  # [P, T, B]
    params = Conv3x3(8).init(jax.random.key(0), frames[0, 0])

    def summed_gradients(layer):
        def member(frames):  # a scan of gradient steps, as in an update
            def step(total, x):
                loss = lambda p: jnp.sum(jnp.tanh(layer.apply(p, x)))  # noqa: E731
                return jax.tree.map(jnp.add, total, jax.grad(loss)(params)), None

            zero = jax.tree.map(jnp.zeros_like, params)
            return jax.lax.scan(step, zero, frames)[0]

        return jax.jit(jax.vmap(member))(frames)

    ours = summed_gradients(Conv3x3(8))
    flax = summed_gradients(nn.Conv(8, (3, 3), padding="VALID"))
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(flax), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("lead", [(), (7,), (3, 5)])
@pytest.mark.parametrize("out", [4, 2, 1])  # 2, 1: g^T x forms (M large)
def test_dense_matmul_values_and_gradients_match_numpy(lead, out):
    rng = np.random.default_rng(0)
    x = rng.normal(size=lead + (6,)).astype(np.float32)
    kernel = rng.normal(size=(6, out)).astype(np.float32)
    g = rng.normal(size=lead + (out,)).astype(np.float32)  # output's cotangent

    def loss(x, kernel):
        return jnp.sum(dense_matmul(x, kernel) * g)

    value = jax.jit(dense_matmul)(x, kernel)
    dx, dkernel = jax.jit(jax.grad(loss, argnums=(0, 1)))(x, kernel)
    np.testing.assert_allclose(value, x @ kernel, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dx, g @ kernel.T, rtol=1e-5, atol=1e-5)
    rows_x, rows_g = x.reshape(-1, 6), g.reshape(-1, out)
    np.testing.assert_allclose(dkernel, rows_x.T @ rows_g, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("out", "members", "recomputed"),
    [(5, (4,), False), (2, (4,), False), (2, (1,), False), (1, (4,), False)]
    + [(5, m, True) for m in [(), (1,), (2, 1), (1, 2), (2, 3)]],
)
def test_dense_matmul_gradients_match_autodiff_under_vmap(out, members, recomputed):
    # members: the sizes of nested vmaps, outermost first.
    keys = jax.random.split(jax.random.key(0), 3)
    x = jax.random.normal(keys[0], (*members, 9, 6))  # [*P, M, K]: a batch each
    kernel = jax.random.normal(keys[1], (*members, 6, out))
    g = jax.random.normal(keys[2], (*members, 9, out))

    def grads(matmul):
        def one(x, kernel, g):
            return jax.grad(lambda x, k: jnp.sum(matmul(x, k) * g), (0, 1))(x, kernel)

        for _ in members:
            one = jax.vmap(one)
        return jax.jit(one)(x, kernel, g)

    def ours(x, kernel):
        return dense_matmul(x, kernel, None, recomputed)

    for a, b in zip(grads(ours), grads(jnp.matmul), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("members", "out"), [(0, 2), (1, 2), (3, 2), (1, 5)])
def test_dense_matmul_second_derivatives_match_autodiff(members, out):  # 0: no vmap
    # Forward over reverse (a Hessian) and reverse over reverse (a gradient's
    # gradient) through the few-unit kernel gradient (2 outputs, M = 9) and
    # a recomputed input's (5 outputs).
    x = jax.random.normal(jax.random.key(0), (9, 6))
    kernel = 0.3 * jax.random.normal(jax.random.key(1), (max(members, 1), 6, out))

    def second(matmul):
        def loss(k):
            return jnp.sum(jnp.tanh(matmul(x, k)) ** 2)

        def both(k):
            return jax.hessian(loss)(k), jax.grad(
                lambda k: jnp.sum(jax.grad(loss)(k) ** 2)
            )(k)

        return jax.jit(jax.vmap(both) if members else both)(
            kernel if members else kernel[0]
        )

    def ours(x, kernel):
        return dense_matmul(x, kernel, None, recomputed_input=out == 5)

    for a, b in zip(second(ours), second(jnp.matmul), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def _lowered_for(platform, fn, *args):
    """The StableHLO text of ``jit(fn)`` lowered for ``platform``."""
    return jax.export.export(jax.jit(fn), platforms=[platform])(*args).mlir_module()


# The head's kernel gradient lowered for CPU, by output units and members:
# (its dot's operand shapes, optimisation barriers in the whole program).
# One unit: g^T x with g^T a reshape. Two, one run: g^T x, g^T and the
# product behind barriers. Two, a population: x^T g, x^T behind a barrier.
CPU_HEAD = {
    (1, 1): ("1x128", "128x84", 2),
    (2, 1): ("2x128", "128x84", 4),
    (1, 3): ("1x128", "3x128x84", 2),  # the cotangent is shared
    (2, 3): ("3x84x128", "128x2", 3),  # the plain vmap of x^T g, as before
}


@pytest.mark.parametrize("platform", ["cpu", "cuda"])
@pytest.mark.parametrize("outputs", [2, 1])
@pytest.mark.parametrize("members", [1, 3])
def test_kernel_gradient_layout_is_chosen_per_platform(platform, outputs, members):
    # The point of dense_matmul: lowered for CPU, the kernel's gradient is a
    # dot whose lhs contracts its last axis, not the leading-axis
    # contraction autodiff emits, which XLA:CPU runs ≈2× slower; lowered for
    # a GPU it is that plain contraction, with no barrier to block fusion.
    net = QNetwork(outputs)
    obs = jnp.ones((128, 4))
    params = net.init(jax.random.key(0), obs[0])

    def grad(params):
        return jax.grad(lambda p: jnp.sum(net.apply(p, obs)))(params)

    if members > 1:
        params = jax.tree.map(lambda a: jnp.stack([a] * members), params)
        grad = jax.vmap(grad)
    text = _lowered_for(platform, grad, params)
    dots = re.findall(
        r"stablehlo\.dot_general .*contracting_dims = \[(\d)\] x \[\d\] : "
        r"\(tensor<([\dx]+)xf32>, tensor<([\dx]+)xf32>\)",
        text,
    )
    assert len(dots) == 2 + 2 + 3  # forward, input and kernel gradients (live)
    # The slow form: a lhs that contracts an axis other than its last.
    transposed = sum(int(axis) != lhs.count("x") for axis, lhs, _ in dots)
    barriers = text.count("stablehlo.optimization_barrier")
    lhs, rhs, cpu_barriers = CPU_HEAD[outputs, members]
    if platform == "cpu":
        assert (barriers, transposed) == (cpu_barriers, 0)
        assert any(dot[1:] == (lhs, rhs) for dot in dots)
    else:
        assert (barriers, transposed) == (0, 3)


@pytest.mark.parametrize(
    ("activation", "members", "plain", "layer_norm"),
    [
        ("relu", (), 0, False),  # one run: x^T copied
        ("relu", (1,), 1, False),  # a population of one: the hidden layer's plain
        ("relu", (3,), 0, False),  # a population: x^T copied
        ("relu", (2, 1), 1, False),  # a size-one level at any depth
        ("relu", (1, 2), 1, False),  # (a run's twin critics in a population of one)
        ("tanh", (1,), 0, False),  # tanh is computed once: its x^T is a plain copy
        ("relu", (1,), 0, True),  # a LayerNorm's activation is read as it is
    ],
)
def test_recomputed_input_gradient_is_plain_in_a_population_of_one(
    activation, members, plain, layer_norm
):
    # The 120 -> 84 layer reads a ReLU: under a vmap of size one, XLA:CPU
    # recomputes the ReLU inside the transposed copy, so that layer's kernel
    # gradient is the plain leading-axis contraction there, and x^T g
    # elsewhere. The first layer (observations) and the 2-unit head keep
    # their forms.
    net = QNetwork(2, activation=activation, layer_norm=layer_norm)
    obs = jnp.ones((128, 4))
    params = net.init(jax.random.key(0), obs[0])

    def grad(params):
        return jax.grad(lambda p: jnp.sum(net.apply(p, obs)))(params)

    for size in reversed(members):
        params = jax.tree.map(lambda a, n=size: jnp.stack([a] * n), params)
        grad = jax.vmap(grad)
    text = _lowered_for("cpu", grad, params)
    dots = re.findall(
        r"stablehlo\.dot_general .*contracting_dims = \[(\d)\] x \[\d\] : "
        r"\(tensor<([\dx]+)xf32>, tensor<([\dx]+)xf32>\)",
        text,
    )
    leading = [lhs for axis, lhs, _ in dots if int(axis) != lhs.count("x")]
    assert len(leading) == plain
    assert all(lhs.endswith("128x120") for lhs in leading)


@pytest.mark.parametrize("platform", ["cpu", "cuda"])
def test_conv_torso_and_batched_init_are_chosen_per_platform(platform):
    # CPU: im2col (a dot, no convolution) and one QR per member in a loop;
    # elsewhere the native convolution, and the vmapped init left batched.
    net = QNetwork(3, hidden=(8,), obs_ndim=3)
    obs = jnp.zeros((5, 10, 10, 4))

    def conv_kernel_gradients(keys):  # [P, 3, 3, 4, 16]
        params = jax.vmap(lambda k: net.init(k, obs[0]))(keys)
        grads = jax.vmap(jax.grad(lambda p: jnp.sum(net.apply(p, obs))))(params)
        return grads["params"]["MLP_0"]["Conv3x3_0"]["kernel"]

    keys = jax.random.split(jax.random.key(0), 3)
    text = _lowered_for(platform, conv_kernel_gradients, keys)
    convolutions = text.count("stablehlo.convolution")
    loops = text.count("stablehlo.while")
    if platform == "cpu":
        assert (convolutions, loops) == (0, 3)  # one init loop per kernel
    else:
        assert (convolutions, loops) == (2, 0)  # forward and kernel gradient


def test_native_conv_equals_im2col_with_gradients_under_vmap():
    from ondevice_rl.cpu.layers import _conv3x3_im2col, _conv3x3_native

    keys = jax.random.split(jax.random.key(2), 2)
    x = jax.random.normal(keys[0], (3, 2, 10, 10, 4))  # [P, B, H, W, C]
    kernel = jax.random.normal(keys[1], (3, 3, 3, 4, 16))

    def grads(conv):
        def one(x, kernel):
            return jax.grad(lambda x, k: jnp.sum(jnp.tanh(conv(x, k))), (0, 1))(
                x, kernel
            )

        return jax.jit(jax.vmap(one))(x, kernel)

    for ours, native in zip(
        grads(_conv3x3_im2col), grads(_conv3x3_native), strict=True
    ):
        np.testing.assert_allclose(ours, native, rtol=1e-4, atol=1e-4)
