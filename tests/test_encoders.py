"""Observations that are not one small float array (ondevice_rl/nn/encoders.py):
pytrees of leaves, pixels through a strided torso, categorical grids
embedded; integer leaves stored in their own dtypes and cast at the
network; normalisation of float leaves only; check-env on categorical
spaces."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ondevice_rl.checks.static import static_checks
from ondevice_rl.env.masks import ACTION_MASK
from ondevice_rl.env.spaces import Box, Discrete
from ondevice_rl.env.types import Environment
from ondevice_rl.envs.probes import ProbeBox
from ondevice_rl.nn.encoders import (
    PIXEL_SIDE,
    LeafEncoding,
    ObsEncoder,
    ObsLayout,
    observation_encoding,
)
from ondevice_rl.nn.networks import MLP
from ondevice_rl.normalize import LeafStats, RunningStats
from ondevice_rl.train import get_algorithm

KEY = jax.random.key(0)
GRID = Box(0, np.array([3, 2]), (5, 5, 2), jnp.uint8, categorical=True)


class GridParams(NamedTuple):
    max_steps: jax.Array


class GridState(NamedTuple):
    time: jax.Array
    cells: jax.Array  # [5, 5, 2] uint8


class GridWorld(Environment):
    """A test world seen four ways: a categorical uint8 grid, a uint8 frame
    larger than ``PIXEL_SIDE``, an int32 position and a float32 vector.
    Reward 1 when the action matches the centre cell's first channel."""

    name = "GridWorld"
    stochastic_step = True

    def default_params(self):
        return GridParams(jnp.int32(8))

    def reset(self, key, params):
        cells = jax.random.randint(key, (5, 5, 2), 0, jnp.array([4, 3]))
        state = GridState(jnp.int32(0), cells.astype(jnp.uint8))
        return self.observe(state, params), state

    def transition(self, key, state, action, params):
        reward = (action == state.cells[2, 2, 0]).astype(jnp.float32)
        cells = jax.random.randint(key, (5, 5, 2), 0, jnp.array([4, 3]))
        return state._replace(cells=cells.astype(jnp.uint8)), reward, False

    #: Whether the observation has the frame (its strided convolutions run
    #: slowly when compiled without backend optimisation, as the default
    #: suite compiles).
    frame = True

    def observe(self, state, params):
        obs = {
            "grid": state.cells,
            "pos": jnp.array([2, 2], jnp.int32),
            "vec": jnp.full((3,), state.time, jnp.float32),
        }
        if self.frame:
            frame = jnp.broadcast_to(state.cells[:1, :1, :1] * 60, (36, 36, 3))
            obs["frame"] = frame.astype(jnp.uint8)
        return obs

    def observation_space(self, params):
        space = {
            "grid": GRID,
            "pos": Box(0, 4, (2,), jnp.int32),
            "vec": Box(0.0, 8.0, (3,), jnp.float32),
        }
        if self.frame:
            space["frame"] = Box(0, 255, (36, 36, 3), jnp.uint8)
        return space

    def action_space(self, params):
        return Discrete(4)


class GridWorldNoFrame(GridWorld):
    frame = False


def grid_world():
    return GridWorld()


def grid_world_no_frame():
    return GridWorldNoFrame()


ENTRY = "test_encoders:grid_world"


class BoxWithIds(ProbeBox):
    """Probe-Box-v0 seen as a dict: its float observation beside three
    categorical ids (continuous actions)."""

    def observe(self, state, params):
        return {"x": jnp.ones((1,), jnp.float32), "ids": jnp.zeros(3, jnp.uint8)}

    def observation_space(self, params):
        ids = Box(0, 4, (3,), jnp.uint8, categorical=True)
        return {"x": Box(0.0, 1.0, (1,), jnp.float32), "ids": ids}


def box_with_ids():
    return BoxWithIds()


def test_the_encoding_follows_the_space():
    assert observation_encoding(Box(-1.0, 1.0, (4,))) == 1
    assert observation_encoding(Box(0.0, 1.0, (10, 10, 4))) == 3  # MinAtar: as before
    side = PIXEL_SIDE + 1
    pixels = observation_encoding(Box(0, 255, (side, side, 3), jnp.uint8))
    assert pixels == ObsLayout((LeafEncoding("pixels", (side, side, 3), 255.0),))
    assert observation_encoding(GRID).leaves[0] == LeafEncoding(
        "categorical", (5, 5, 2), num_values=(4, 3)
    )
    # Leaves in jax.tree.leaves order (sorted keys); the action mask left out.
    masked = {"b": Discrete(5), ACTION_MASK: Box(0, 1, (3,), jnp.bool_), "a": GRID}
    layout = observation_encoding(masked)
    assert [leaf.kind for leaf in layout.leaves] == ["categorical", "categorical"]
    assert layout.leaves[1].num_values == (5,)
    small_ints = observation_encoding(Box(0, 9, (4,), jnp.int32))
    assert small_ints.leaves == (LeafEncoding("vector", (4,), 9.0),)


def test_the_pixel_torso_keeps_the_first_dense_layer_small():
    """A [128, 128, 3] frame: 4,096 features (strides 4, 2, 2; 64 channels),
    where the image torso's stride-1 3×3 conv would give 254,016."""
    space = Box(0, 255, (128, 128, 3), jnp.uint8)
    net = MLP((64,), 3, 1.0, obs_ndim=observation_encoding(space))
    obs = jnp.zeros((128, 128, 3), jnp.uint8)
    params = jax.eval_shape(net.init, KEY, obs)["params"]
    assert params["Dense_0"]["kernel"].shape == (4096, 64)
    total = sum(np.prod(x.shape) for x in jax.tree.leaves(params))
    assert total < 400_000
    # Just past PIXEL_SIDE, a batch of two: SAME padding keeps 3×3×64 cells.
    side = PIXEL_SIDE + 1
    space = Box(0, 255, (side, side, 3), jnp.uint8)
    small = MLP((8,), 3, 1.0, obs_ndim=observation_encoding(space))
    frames = jax.random.randint(KEY, (2, side, side, 3), 0, 256).astype(jnp.uint8)
    params = jax.eval_shape(small.init, KEY, frames[0])["params"]
    assert params["Dense_0"]["kernel"].shape == (3 * 3 * 64, 8)
    out = jax.jit(lambda f: small.apply(small.init(KEY, f[0]), f))(frames)
    assert out.shape == (2, 3) and np.all(np.isfinite(out))


def test_categorical_entries_are_looked_up_and_intensities_scaled():
    # Two channels of 3 and 5 values: index i of channel c is row offset_c + i.
    layout = observation_encoding(Box(0, np.array([2, 4]), (2,), jnp.uint8, True))
    encoder = ObsEncoder(layout)
    x = jnp.array([1, 3], jnp.uint8)
    params = encoder.init(KEY, x)
    table = params["params"]["embedding_0"]  # [3 + 5, E]
    features = encoder.apply(params, x)
    np.testing.assert_allclose(features, jnp.concatenate([table[1], table[3 + 3]]))
    # uint8 intensities reach the network divided by the space's high.
    as_uint8 = ObsEncoder(observation_encoding(Box(0, 255, (4, 4, 1), jnp.uint8)))
    as_float = ObsEncoder(ObsLayout((LeafEncoding("image", (4, 4, 1)),)))
    frame = jax.random.randint(KEY, (4, 4, 1), 0, 256).astype(jnp.uint8)
    both = jax.jit(
        lambda frame: (
            as_uint8.apply(params := as_uint8.init(KEY, frame), frame),
            as_float.apply(params, frame.astype(jnp.float32) / 255.0),
        )
    )(frame)
    np.testing.assert_allclose(*both, rtol=1e-6)


def test_each_categorical_leaf_has_its_own_table():
    """Jumanji Maze's observation: four ``Discrete`` positions beside a bool
    grid. Each gets a table of its own, looked up by its index."""
    pos = {"row": Discrete(10), "col": Discrete(10)}
    space = {"agent": pos, "target": pos, "walls": Box(0, 1, (3, 3), jnp.bool_)}
    encoder = ObsEncoder(observation_encoding(space))
    index = {"row": jnp.int32(2), "col": jnp.int32(7)}
    obs = {"agent": index, "target": index, "walls": jnp.eye(3, dtype=jnp.bool_)}
    params = encoder.init(KEY, obs)["params"]
    assert sorted(params) == [f"embedding_{k}" for k in range(4)]
    tables = [params[f"embedding_{k}"] for k in range(4)]  # leaf order
    features = encoder.apply({"params": params}, obs)
    expected = [t[i] for t, i in zip(tables, [7, 2, 7, 2], strict=True)]
    expected.append(jnp.eye(3).ravel())
    np.testing.assert_allclose(features, jnp.concatenate(expected))


def test_check_env_refuses_a_categorical_box_that_is_not_of_indices():
    class FloatGrid(GridWorld):
        def observation_space(self, params):
            space = super().observation_space(params)
            return {**space, "grid": Box(0.0, 3.0, (5, 5, 2), categorical=True)}

    results, _ = static_checks(GridWorld(), GridWorld().default_params())
    assert all(r.ok for r in results), results
    results, _ = static_checks(FloatGrid(), GridWorld().default_params())
    failed = [r.detail for r in results if not r.ok]
    assert failed == [
        "the categorical Box(float32[5, 5, 2], categorical) needs an integer "
        "dtype (its entries are indices)"
    ]


@pytest.mark.parametrize("name", ["ppo", "ppo-gru", "dqn"])
def test_integer_observations_keep_their_dtype_in_storage(name):
    """The rollout's and the replay buffer's observations keep uint8 and
    int32 (no float copy); obs statistics cover the float leaf only; a
    recurrent core takes the encoders' features."""
    algo = get_algorithm(name.split("-")[0])
    config = algo.config(env=ENTRY, num_envs=2, hidden=(8,))
    if name.startswith("ppo"):
        memory = "gru" if name == "ppo-gru" else "none"
        config = config.replace(
            num_steps=4, num_minibatches=2, normalize_obs=True, memory=memory
        )  # a recurrent minibatch is whole envs' sequences
    else:
        config = config.replace(buffer_size=64, batch_size=8, learning_starts=8)
    trainer = algo.make_trainer(config)
    state = jax.eval_shape(trainer.init, KEY, config.hyperparams)
    dtypes = {k: str(v.dtype) for k, v in state.rollout.obs.items()}
    expected = {"frame": "uint8", "grid": "uint8", "pos": "int32", "vec": "float32"}
    assert dtypes == expected
    if name == "dqn":
        stored = state.extra.buffer.data
        assert {k: str(v.dtype) for k, v in stored.obs.items()} == expected
        assert stored.final_obs["grid"].shape == (config.buffer_capacity, 2, 5, 5, 2)
    else:  # leaves in sorted-key order: frame, grid, pos, vec
        stats = state.normalizer.obs
        assert isinstance(stats, LeafStats)
        assert [isinstance(s, RunningStats) for s in stats.leaves] == [0, 0, 0, 1]


def test_pqn_learns_on_grids_integers_and_vectors_at_once():
    """One compiled program: a few PQN updates with obs normalisation on a
    categorical grid, an int32 and a float32 leaf; the embedding and the
    grid's convolution move, metrics stay finite, statistics take in the
    float leaf."""
    algo = get_algorithm("pqn")
    config = algo.config(
        env="test_encoders:grid_world_no_frame", num_envs=4, num_steps=4,
        total_timesteps=48, hidden=(16,), update_epochs=1, num_minibatches=1,
        normalize_obs=True,
    )  # fmt: skip
    trainer = algo.make_trainer(config)

    @jax.jit  # init and run: one program
    def init_and_run(key, hp):
        start = trainer.init(key, hp)
        return start, trainer.run(start, hp, None, config.num_updates)

    start, (state, metrics) = init_and_run(KEY, config.hyperparams)
    assert all(np.all(np.isfinite(v)) for v in metrics.values())
    encoder = state.params["params"]["MLP_0"]["ObsEncoder_0"]
    before = start.params["params"]["MLP_0"]["ObsEncoder_0"]
    for name in ("embedding_0", "Conv3x3_0"):
        moved = jax.tree.map(lambda a, b: np.any(a != b), encoder[name], before[name])
        assert all(jax.tree.leaves(moved)), name
    vec_stats = state.normalizer.obs.leaves[2]  # grid, pos, vec
    assert float(vec_stats.count) > 48  # every acted observation merged


@pytest.mark.slow
def test_ppo_learns_from_the_embedded_grid():
    """The reward is for naming the centre cell's first channel (4 ids):
    random play scores 2 of 8, reading the embedded grid 8."""
    algo = get_algorithm("ppo")
    config = algo.config(
        env="test_encoders:grid_world_no_frame", num_envs=16, num_steps=8,
        total_timesteps=40_000, hidden=(64,), learning_rate=3e-3,
    )  # fmt: skip
    out = jax.jit(algo.make_train(config))(KEY, config.hyperparams)
    final = float(jnp.mean(out.metrics["episode_return"][-10:]))
    print("grid world final return", final)
    assert final > 6.0


@pytest.mark.parametrize("name", ["sac", "td3"])
def test_off_policy_actor_critics_take_pytree_observations(name):
    """Traced, not compiled: an update's shapes, the buffer's uint8 ids."""
    algo = get_algorithm(name)
    config = algo.config(
        env="test_encoders:box_with_ids", hidden=(8,), buffer_size=64, batch_size=8,
        learning_starts=8,
    )  # fmt: skip
    trainer = algo.make_trainer(config)
    state = jax.eval_shape(trainer.init, KEY, config.hyperparams)
    assert state.extra.buffer.data.obs["ids"].dtype == jnp.uint8
    run = lambda state, hp: trainer.run(state, hp, None, 2)  # noqa: E731
    after, metrics = jax.eval_shape(run, state, config.hyperparams)
    assert jax.tree.structure(after) == jax.tree.structure(state)
    assert metrics["episode_return"].shape == (2,)
