"""ondevice_rl.files.checkpoint: save/restore round trips, typed PRNG keys included."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.files import checkpoint


class State(NamedTuple):
    params: dict
    step: jax.Array
    key: jax.Array


def _state(seed: int) -> State:
    key = jax.random.key(seed)
    w = jax.random.normal(key, (3, 4))
    return State(
        {"dense": {"w": w, "b": jnp.zeros(4)}},
        jnp.int32(seed),
        jax.random.split(key, 2),
    )


def _assert_equal(a: State, b: State):
    assert jax.tree.structure(a) == jax.tree.structure(b)
    np.testing.assert_array_equal(a.params["dense"]["w"], b.params["dense"]["w"])
    np.testing.assert_array_equal(a.params["dense"]["b"], b.params["dense"]["b"])
    assert a.step.dtype == b.step.dtype and int(a.step) == int(b.step)
    assert b.key.dtype == a.key.dtype and b.key.shape == (2,)
    np.testing.assert_array_equal(
        jax.random.key_data(a.key), jax.random.key_data(b.key)
    )


def test_round_trip(tmp_path):
    state = _state(1)
    path = checkpoint.save(tmp_path / "ckpt", state)
    assert path.is_absolute() and path.is_dir()
    _assert_equal(state, checkpoint.restore(path, _state(0)))


def test_save_replaces_existing(tmp_path):
    checkpoint.save(tmp_path / "ckpt", _state(1))
    checkpoint.save(tmp_path / "ckpt", _state(2))
    _assert_equal(_state(2), checkpoint.restore(tmp_path / "ckpt", _state(0)))


def test_empty_arrays_round_trip(tmp_path):
    """Zero-size arrays (MJX's Data has some; orbax refuses them) come back
    with their shape and dtype, in single checkpoints and numbered ones."""
    state = {
        "empty": jnp.zeros((0, 3), jnp.int32),
        "x": jnp.arange(3.0),
        "s": _state(1),
    }
    like = {"empty": jnp.ones((0, 3), jnp.int32), "x": jnp.zeros(3), "s": _state(0)}
    restored = checkpoint.restore(checkpoint.save(tmp_path / "one", state), like)
    with checkpoint.Checkpoints(tmp_path / "many") as checkpoints:
        checkpoints.save(7, state)
        numbered = checkpoints.restore(7, like)
    with checkpoint.Checkpoints(tmp_path / "many") as checkpoints:  # as policy.py
        fields = {"empty": like["empty"], "x": like["x"]}
        fields = checkpoints.restore_fields(7, fields)
    for out in (restored, numbered, fields):
        assert out["empty"].shape == (0, 3) and out["empty"].dtype == jnp.int32
        np.testing.assert_array_equal(out["x"], [0.0, 1.0, 2.0])
    _assert_equal(state["s"], restored["s"])
    _assert_equal(state["s"], numbered["s"])
