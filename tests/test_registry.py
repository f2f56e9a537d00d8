"""The algorithm registry and protocol: records, ranges, and who imports PPO."""

import ast
import dataclasses
import math
from pathlib import Path

import jax
import numpy as np
import pytest

from ondevice_rl.train import algorithms, get_algorithm
from ondevice_rl.train.kit.config import Range
from ondevice_rl.train.kit.registry import algorithm_of

ROOT = Path(__file__).resolve().parents[1]


def test_every_algorithm_has_ppos_public_shape():
    assert {"ppo", "a2c"} <= set(algorithms())
    for name in algorithms():
        algorithm = get_algorithm(name)
        assert algorithm.name == name and algorithm.summary
        config = algorithm.config()  # defaults are valid
        assert dataclasses.is_dataclass(config)
        with pytest.raises(dataclasses.FrozenInstanceError):
            config.env = "Acrobot-v1"
        assert algorithm_of(config) is algorithm
        hp = config.hyperparams
        assert type(hp) is algorithm.hyperparams
        assert set(algorithm.ranges) == set(hp._fields)
        for leaf in hp:
            assert leaf.dtype == np.float32 and leaf.shape == ()
        for field in ("num_updates", "steps_per_update", "learn_batch_size"):
            assert getattr(config, field) >= 1
        assert not set(algorithm.static_fields) & set(hp._fields)
        assert "env" not in algorithm.static_fields


# Each learner's metrics of a given length from eval_shape of its trainer
# (tests/test_kit.py::test_every_learner_gives_the_declared_surface) and a
# compiled make_train's metrics, bitwise (tests/test_golden.py): under slow.
@pytest.mark.slow
@pytest.mark.parametrize("name", ["ppo", "a2c"])
def test_make_train_output_has_a_leading_updates_axis(name):
    algorithm = get_algorithm(name)
    defaults = algorithm.config()
    steps = 2 * defaults.steps_per_update
    config = algorithm.config(total_timesteps=steps, hidden=(8,))
    out = jax.jit(algorithm.make_train(config))(jax.random.key(0), config.hyperparams)
    assert out.metrics["episode_return"].shape == (config.num_updates,) == (2,)
    trainer = algorithm.make_trainer(config)
    state = jax.eval_shape(trainer.init, jax.random.key(0), config.hyperparams)
    _, metrics = jax.eval_shape(
        lambda s: trainer.run(s, config.hyperparams, None, 1), state
    )
    assert set(metrics) == set(out.metrics)


def test_out_of_range_hyperparameters_are_refused_on_construction():
    for name in algorithms():
        algorithm = get_algorithm(name)
        for field, valid in algorithm.ranges.items():
            bad = [math.nan, math.inf]
            if valid.low > -math.inf:
                bad.append(valid.low - 1.0)
            if valid.high < math.inf:
                bad.append(valid.high + 1.0)
            for value in bad:
                with pytest.raises(ValueError, match=field) as info:
                    algorithm.config(**{field: value})
                assert "\n" not in str(info.value)


def test_range_bounds_and_message():
    positive = Range(0.0, math.inf, low_open=True)
    assert positive.check("lr", 1e-3) == 1e-3
    with pytest.raises(ValueError, match=r"lr=0.0 is outside \(0, inf\]"):
        positive.check("lr", 0.0)
    with pytest.raises(ValueError, match="not a number"):
        positive.check("lr", "fast")
    assert Range(0.0, 1.0).check("gamma", 1.0) == 1.0


def test_unknown_algorithm_names_close_matches():
    with pytest.raises(KeyError, match="Did you mean ppo"):
        get_algorithm("ppp")


def test_discrete_only_learners_refuse_continuous_envs():
    for name in algorithms():
        algorithm = get_algorithm(name)
        config = algorithm.config(env="Pendulum-v1")
        if algorithm.continuous_actions:
            algorithm.make_trainer(config)
        else:
            with pytest.raises(ValueError, match=f"{name} needs a discrete"):
                algorithm.make_trainer(config)


def test_continuous_only_learners_refuse_discrete_envs():
    for name in algorithms():
        algorithm = get_algorithm(name)
        assert algorithm.actions in ("discrete", "continuous", "discrete, continuous")
        config = algorithm.config(env="CartPole-v1")
        if algorithm.discrete_actions:
            algorithm.make_trainer(config)
        else:
            with pytest.raises(ValueError, match=f"{name} needs a continuous"):
                algorithm.make_trainer(config)


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def test_only_the_registry_and_bench_host_import_ppo_outside_its_package():
    """Generic code reaches PPO through the registry; ``bench host`` is a
    baseline of PPO and A2C by name, built from their parts (``LEARNERS``)."""
    importers = []
    for folder in ("ondevice_rl", "envs", "train"):
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith("train/ppo/"):
                continue
            modules = _imported_modules(path)
            if any(m.startswith("ondevice_rl.train.ppo") for m in modules):
                importers.append(rel)
    assert sorted(importers) == ["train/bench/host/learner.py", "train/kit/registry.py"]


def test_imports_run_one_way_core_then_envs_then_train():
    for path in (ROOT / "ondevice_rl").rglob("*.py"):
        top_level = ast.parse(path.read_text()).body
        for node in top_level:
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("ondevice_rl.train"), path
                if path.name != "__init__.py":
                    assert not node.module.startswith("ondevice_rl.envs"), path
    for path in (ROOT / "envs").rglob("*.py"):
        for module in _imported_modules(path):
            assert not module.startswith("ondevice_rl.train"), path
