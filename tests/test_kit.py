"""The learner kit: the surface every learner gives, its policies, schedules,
ε-greedy and the one-line declaration of traced hyperparameters."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ondevice_rl
import ondevice_rl.train as train
from ondevice_rl.nn.networks import QNetwork
from ondevice_rl.train import algorithms, get_algorithm
from ondevice_rl.train.kit.agent import Agent, build_agent
from ondevice_rl.train.kit.config import field_help
from ondevice_rl.train.kit.env_setup import EnvSetup, make_env
from ondevice_rl.train.kit.exploration import epsilon_greedy, linear_epsilon
from ondevice_rl.train.kit.policies import actor_critic_policy, q_policy
from ondevice_rl.train.kit.protocol import Trainer
from ondevice_rl.train.kit.schedules import learning_rate_fn
from ondevice_rl.train.kit.state import PolicyParams, TrainState, policy_params

KEY = jax.random.key(0)
TINY = {
    "ppo": dict(num_envs=2, num_steps=4, num_minibatches=2, total_timesteps=16),
    "a2c": dict(num_envs=2, num_steps=4, total_timesteps=16),
    "pqn": dict(num_envs=2, num_steps=4, num_minibatches=2, total_timesteps=16),
    "dqn": dict(num_envs=2, buffer_size=16, batch_size=4, total_timesteps=16),
    "sac": dict(num_envs=2, buffer_size=16, batch_size=4, total_timesteps=16),
    "td3": dict(num_envs=2, buffer_size=16, batch_size=4, total_timesteps=16),
}


@pytest.mark.parametrize("name", algorithms())
def test_every_learner_gives_the_declared_surface(name):
    algorithm = get_algorithm(name)
    config = algorithm.config(hidden=(8,), **TINY[name])
    trainer = algorithm.make_trainer(config)
    assert isinstance(trainer, Trainer) and type(trainer) is Trainer
    assert isinstance(trainer.setup, EnvSetup) and trainer.config is config
    state = jax.eval_shape(trainer.init, KEY, config.hyperparams)
    assert isinstance(state, TrainState)
    run = functools.partial(trainer.run, num_updates=3)
    _, metrics = jax.eval_shape(run, state, config.hyperparams, None)
    assert all(m.shape == (3,) for m in metrics.values())
    obs = jnp.zeros((5,) + trainer.setup.obs_shape)
    carry = trainer.initial_carry((5,))
    params = policy_params(state)
    for deterministic in (True, False):
        action, next_carry = jax.eval_shape(
            lambda p, c, o, det=deterministic: trainer.policy(p, c, o, KEY, det),
            params,
            carry,
            obs,
        )
        if trainer.setup.continuous:
            assert action.shape == (5, trainer.setup.action_dim)
            assert action.dtype == jnp.float32
        else:
            assert action.shape == (5,) and action.dtype == jnp.int32
        assert jax.tree.structure(next_carry) == jax.tree.structure(carry)
    # The record's program is the trainer's init then run.
    out = jax.eval_shape(algorithm.make_train(config), KEY, config.hyperparams)
    assert jax.tree.structure(out.state) == jax.tree.structure(state)


@pytest.mark.parametrize("name", algorithms())
def test_traced_hyperparameters_are_declared_once_with_range_and_help(name):
    config = get_algorithm(name).config
    traced = config.HYPERPARAMS._fields
    assert traced and set(config.RANGES) == set(traced)
    defaults = {f.name: f.default for f in dataclasses.fields(config)}
    for field in traced:
        config.RANGES[field].check(field, defaults[field])
        assert field_help(config, field), field
    assert field_help(config, "num_envs") is None  # static fields are not traced


def _setup(env_name: str) -> EnvSetup:
    return make_env(env_name)


def test_actor_critic_policy_argmax_sample_and_mask():
    setup = _setup("CartPole-v1")
    agent = build_agent(setup, get_algorithm("ppo").config(hidden=(8,)), "actor_critic")
    network, params = agent.network, agent.init(KEY)
    policy = jax.jit(actor_critic_policy(agent, setup), static_argnums=4)
    obs = jax.random.normal(KEY, (64, 4))
    logits = network.apply(params, obs).logits_or_mean
    greedy, carry = policy(params, (), obs, None, True)
    assert carry == () and greedy.dtype == jnp.int32
    np.testing.assert_array_equal(greedy, jnp.argmax(logits, -1))
    sampled, _ = policy(params, (), obs, KEY, False)
    assert set(np.unique(sampled)) == {0, 1}
    # Masking the best action off: never chosen, greedy or sampled.
    best = jnp.argmax(logits, -1)
    mask = jax.nn.one_hot(best, 2) == 0
    for deterministic, key in ((True, None), (False, KEY)):
        acted, _ = policy(params, (), obs, key, deterministic, mask)
        np.testing.assert_array_equal(acted, 1 - best)


def test_actor_critic_policy_clips_box_actions_and_normalises_obs():
    setup = _setup("Pendulum-v1")
    agent = build_agent(setup, get_algorithm("ppo").config(hidden=(8,)), "actor_critic")
    network, params = agent.network, agent.init(KEY)
    params["params"]["log_std"] = jnp.array([2.0])  # wide: samples get clipped
    policy = actor_critic_policy(agent, setup)
    obs = jax.random.normal(KEY, (256, 3))
    sampled, _ = policy(params, (), obs, KEY, False)
    assert sampled.shape == (256, 1)
    assert np.all(np.abs(sampled) <= 2.0) and np.any(np.abs(sampled) == 2.0)
    mean = network.apply(params, obs).logits_or_mean
    greedy, _ = policy(PolicyParams(params, None), (), obs, None, True)
    np.testing.assert_allclose(greedy, jnp.clip(mean, -2, 2), rtol=1e-6)


def test_q_policy_greedy_epsilon_and_mask():
    network = QNetwork(3, (8,))
    params = network.init(KEY, jnp.zeros(4))
    obs = jax.random.normal(KEY, (4000, 4))
    q = network.apply(params, obs)
    greedy = jnp.argmax(q, -1)
    agent = Agent(
        network, False, None, None, lambda p, c, o, f: (c, network.apply(p, o)), None
    )
    policy = q_policy(agent, 0.5)
    np.testing.assert_array_equal(policy(params, (), obs, None, True)[0], greedy)
    explored = np.mean(np.asarray(policy(params, (), obs, KEY, False)[0]) != greedy)
    assert 0.3 < explored < 0.37  # ε · 2/3 of random actions differ
    mask = jnp.ones((4000, 3), bool).at[jnp.arange(4000), greedy].set(False)
    for deterministic in (True, False):
        acted, _ = policy(params, (), obs, KEY, deterministic, mask)
        assert not np.any(np.asarray(acted) == np.asarray(greedy))


def test_epsilon_greedy_mask_draws_uniformly_over_legal_actions():
    q = jnp.zeros((20000, 4)).at[:, 0].set(1.0)
    mask = jnp.array([True, False, True, True])
    acted = np.asarray(epsilon_greedy(KEY, q, 1.0, jnp.broadcast_to(mask, q.shape)))
    counts = np.bincount(acted, minlength=4) / acted.size
    np.testing.assert_allclose(counts, [1 / 3, 0, 1 / 3, 1 / 3], atol=0.02)


def test_linear_epsilon_in_env_steps():
    eps = linear_epsilon(jnp.array([0, 50, 100, 400]), 100, 1.0, 0.1)
    np.testing.assert_allclose(eps, [1.0, 0.55, 0.1, 0.1], rtol=1e-6)


@pytest.mark.parametrize(
    "kind, expected",
    [
        ("constant", [1.0, 1.0, 1.0, 1.0]),
        ("linear", [1.0, 1.0, 0.75, 0.5]),  # two optimiser steps per update
        ("cosine", [1.0, 1.0, 0.5 * (1 + np.cos(np.pi / 4)), 0.5]),
    ],
)
def test_learning_rate_schedules_count_updates(kind, expected):
    lr = learning_rate_fn(kind, jnp.float32(1.0), 4, 2)
    got = [float(lr(jnp.int32(count))) for count in (0, 1, 2, 4)]
    np.testing.assert_allclose(got, expected, rtol=1e-6)


SURFACE = set(Trainer._fields) | {"env", "default_env_params"}
GENERIC_ROOMS = ("run", "services", "use", "bench", "sweep", "cli")


def test_generic_code_uses_only_the_trainer_surface():
    """Runner, services, policy use, bench, sweeps and the CLI read no
    learner internals: every ``trainer.<name>`` they write is on the surface."""
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[1] / "train"
    used = {}
    for room in GENERIC_ROOMS:
        for path in (root / room).rglob("*.py"):
            for name in re.findall(r"\btrainer\.(\w+)", path.read_text()):
                used.setdefault(name, path.name)
    assert used, "the scan found no trainer use at all"
    assert not set(used) - SURFACE, {n: used[n] for n in set(used) - SURFACE}


def test_package_faces():
    assert train.__all__ == [
        "algorithms",
        "get_algorithm",
        "load_recipe",
        "resume_training",
        "train_from_config",
    ]
    for name in train.__all__:
        assert callable(getattr(train, name)), name
    assert train.load_recipe("cartpole_ppo").env == "CartPole-v1"
    for name in ("make", "load_policy", "run_training", "Environment", "envs"):
        assert hasattr(ondevice_rl, name), name
