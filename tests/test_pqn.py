"""PQN: probe-env Q-values, truncation, determinism, recompiles, host silence."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ondevice_rl.metrics import EPISODE_METRICS, final_return
from ondevice_rl.train import pqn

# Its module-scoped programs are built once: its tests share one xdist worker.
pytestmark = pytest.mark.xdist_group("pqn")

#: Every metric the learner reports per update.
METRIC_NAMES = EPISODE_METRICS + pqn.LearnStats._fields + ("epsilon",)

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

RECIPE = Path(pqn.__file__).parents[1] / "recipes" / "cartpole_pqn.toml"

# Probes: actions have no effect, so every action's value is the state's.
PROBE = dict(
    num_envs=8,
    num_steps=16,
    update_epochs=4,
    num_minibatches=2,
    hidden=(16,),  # a constant or two to fit: a small program is enough
    learning_rate=3e-3,
)
TINY = pqn.PQNConfig(
    total_timesteps=2_048,
    num_envs=16,
    num_steps=16,
    num_minibatches=4,
    hidden=(16,),
    exploration_steps=512,
)


def _q(trainer, state, obs):
    """``Q(obs)`` ``[A]`` of the trained network."""
    return np.asarray(
        trainer.network.apply(state.params, jnp.asarray(obs, jnp.float32))
    )


def _train(config, seed=0, hp=None):
    trainer = pqn.make_trainer(config)
    out = jax.jit(pqn.make_train(config))(
        jax.random.PRNGKey(seed), hp if hp is not None else config.hyperparams
    )
    return trainer, out


@pytest.fixture(scope="module")
def tiny_train():
    """One compiled ``train`` of ``TINY``, shared by the tests that only run it."""
    return jax.jit(pqn.make_train(TINY))


# default suite: test_probe_two_step_learns_discounted_values checks Q([1.0]) = 1
# after a reward of 1 and a termination, as this does.
@pytest.mark.slow
def test_probe_one_step_learns_value_one():
    config = pqn.PQNConfig(env="Probe-OneStep-v0", total_timesteps=8_192, **PROBE)
    trainer, out = _train(config)
    np.testing.assert_allclose(_q(trainer, out.state, [1.0]), 1.0, atol=0.05)


def test_probe_two_step_learns_discounted_values():
    config = pqn.PQNConfig(
        env="Probe-TwoStep-v0", total_timesteps=16_384, gamma=0.9, **PROBE
    )
    trainer, out = _train(config)
    np.testing.assert_allclose(_q(trainer, out.state, [0.0]), 0.9, atol=0.05)
    np.testing.assert_allclose(_q(trainer, out.state, [1.0]), 1.0, atol=0.05)


def test_probe_truncation_bootstraps_from_final_obs():
    # With gamma=0.9 the true value is 10. Treating the 5-step time limit as
    # termination caps the learned value below 3.6 (see envs/probes.py).
    config = pqn.PQNConfig(
        env="Probe-Truncation-v0", total_timesteps=32_768, gamma=0.9, **PROBE
    )
    trainer, out = _train(config)
    np.testing.assert_allclose(_q(trainer, out.state, [1.0]), 10.0, atol=1.0)


def test_metrics_shapes_epsilon_schedule_and_finite(tiny_train):
    out = tiny_train(jax.random.PRNGKey(0), TINY.hyperparams)
    assert set(out.metrics) == set(METRIC_NAMES)
    for name in METRIC_NAMES:
        values = np.asarray(out.metrics[name])
        assert values.shape == (TINY.num_updates,), name
        assert np.all(np.isfinite(values)), name
    eps = np.asarray(out.metrics["epsilon"])
    assert eps[0] == pytest.approx(TINY.eps_start)
    assert eps[-1] == pytest.approx(TINY.eps_end)
    assert np.all(np.diff(eps) <= 1e-7)
    assert int(out.state.update_step) == TINY.num_updates


def test_network_has_layer_norm():
    def layer_norms(config):
        trainer = pqn.make_trainer(config)
        params = jax.eval_shape(trainer.init, jax.random.PRNGKey(0), config.hyperparams)
        paths = jax.tree_util.tree_flatten_with_path(params.params)[0]
        return [jax.tree_util.keystr(p) for p, _ in paths if "LayerNorm" in str(p)]

    names = layer_norms(TINY)
    assert any("scale" in n for n in names) and any("bias" in n for n in names)
    assert layer_norms(TINY.replace(layer_norm=False)) == []


def test_same_key_gives_bitwise_identical_metrics(tiny_train):
    key = jax.random.PRNGKey(3)
    a = jax.device_get(tiny_train(key, TINY.hyperparams).metrics)
    b = jax.device_get(tiny_train(key, TINY.hyperparams).metrics)
    c = jax.device_get(jax.jit(pqn.make_train(TINY))(key, TINY.hyperparams).metrics)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])
        np.testing.assert_array_equal(a[name], c[name])
    d = jax.device_get(tiny_train(jax.random.PRNGKey(4), TINY.hyperparams).metrics)
    assert not np.array_equal(a["td_loss"], d["td_loss"])


def test_hyperparams_are_traced_no_recompile_and_values_matter():
    train = jax.jit(jax.vmap(pqn.make_train(TINY)))
    keys = jax.random.split(jax.random.PRNGKey(0), 2)

    def population(**overrides):
        hp = TINY.hyperparams._replace(
            **{k: jnp.float32(v) for k, v in overrides.items()}
        )
        return jax.tree.map(lambda x: jnp.stack([x, x]), hp)

    first = train(keys, population(learning_rate=1e-4)).metrics
    second = train(keys, population(learning_rate=1e-2, q_lambda=0.3, eps_end=0.5))
    assert train._cache_size() == 1
    assert not np.allclose(first["td_loss"], second.metrics["td_loss"])
    assert not np.allclose(first["epsilon"], second.metrics["epsilon"])


HOST_MARKERS = ("callback", "infeed", "outfeed", "send", "recv")


def _host_markers(lowered_text: str) -> list[str]:
    return [m for m in HOST_MARKERS if m in lowered_text.lower()]


def test_lowered_program_has_no_host_traffic(tiny_train):
    text = tiny_train.lower(jax.random.PRNGKey(0), TINY.hyperparams).as_text()
    assert _host_markers(text) == []

    # The check must be able to fail: a debug callback shows up in the text.
    def noisy(x):
        jax.debug.callback(lambda v: None, x)
        return x + 1

    assert "callback" in _host_markers(jax.jit(noisy).lower(1.0).as_text())


def test_compiled_run_under_transfer_guard(tiny_train):
    key = jax.device_put(jax.random.PRNGKey(0))
    hp = jax.device_put(TINY.hyperparams)
    tiny_train(key, hp)  # compile outside the guard
    with jax.transfer_guard("disallow"):
        jax.block_until_ready(tiny_train(key, hp))


def test_continuous_env_is_rejected():
    config = pqn.PQNConfig(env="Pendulum-v1")
    with pytest.raises(ValueError, match="pqn.*Pendulum-v1"):
        pqn.make_train(config)
    assert pqn.ALGORITHM.continuous_actions is False


def test_config_validation_messages():
    with pytest.raises(ValueError, match="num_minibatches"):
        pqn.PQNConfig(num_envs=3, num_steps=5, num_minibatches=4)
    with pytest.raises(ValueError, match="num_envs"):
        pqn.PQNConfig(num_envs=0)
    with pytest.raises(ValueError, match="exploration_steps"):
        pqn.PQNConfig(exploration_steps=0)
    with pytest.raises(ValueError, match="lr_schedule"):
        pqn.PQNConfig(lr_schedule="step")
    with pytest.raises(ValueError, match="eps_end"):
        pqn.PQNConfig(eps_end=1.5)
    with pytest.raises(ValueError, match="q_lambda"):
        pqn.PQNConfig(q_lambda=-0.1)
    with pytest.raises(ValueError, match="less than one update"):
        pqn.PQNConfig(total_timesteps=10)
    config = pqn.PQNConfig(num_envs=8, num_steps=4, num_minibatches=2)
    assert config.steps_per_update == 32 and config.learn_batch_size == 16
    assert config.num_updates == config.total_timesteps // 32
    assert pqn.ALGORITHM.hyperparam_fields == pqn.Hyperparams._fields


def _recipe_config() -> pqn.PQNConfig:
    with open(RECIPE, "rb") as f:
        values = tomllib.load(f)
    assert values.pop("algo") == "pqn"
    return pqn.PQNConfig(**values)


def test_recipe_sets_every_field():
    config = _recipe_config()
    assert config.env == "CartPole-v1" and config.total_timesteps <= 500_000
    with open(RECIPE, "rb") as f:
        keys = set(tomllib.load(f)) - {"algo"}
    assert keys == set(config.to_dict())


@pytest.mark.slow
def test_cartpole_recipe_eight_seeds_reach_475():
    config = _recipe_config()
    keys = jax.random.split(jax.random.PRNGKey(0), 8)
    train = jax.jit(jax.vmap(pqn.make_train(config), in_axes=(0, None)))
    out = train(keys, config.hyperparams)
    returns = np.asarray(out.metrics["episode_return"])
    assert returns.shape == (8, config.num_updates)
    final = final_return(returns)
    assert final.mean() >= 475.0, final
