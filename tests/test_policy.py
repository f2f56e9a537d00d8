"""One policy for every learner (train/use/policy.py), ``ondevice_rl.load_policy``
and the gymnasium cross-check of a trained CartPole policy."""

import subprocess
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ondevice_rl
from ondevice_rl.evaluation import evaluate
from ondevice_rl.networks import ActorCritic, QNetwork
from ondevice_rl.train import get_algorithm
from ondevice_rl.train.run.runner import run_training
from ondevice_rl.train.services.programs import PROGRAMS
from ondevice_rl.train.use.policy import make_policy, run_in_gymnasium

KEY = jax.random.key(0)


class _Trainer:
    """The four attributes make_policy may use."""

    def __init__(self, network, env_name, **config):
        self.network = network
        self.config = type("Config", (), {"env": env_name, **config})()
        self.env, self.default_env_params = ondevice_rl.make(env_name)


def _params(trainer, obs_dim):
    return jax.jit(trainer.network.init)(KEY, jnp.zeros((obs_dim,)))


def _policy(trainer):
    """``make_policy(trainer)``, jitted (fewer small eager compiles)."""
    return jax.jit(make_policy(trainer), static_argnums=3)


def test_actor_critic_discrete_argmax_or_sample():
    trainer = _Trainer(ActorCritic(2, False, (8,)), "CartPole-v1")
    policy, params = _policy(trainer), _params(trainer, 4)
    obs = jax.random.normal(KEY, (64, 4))
    logits = trainer.network.apply(params, obs).logits_or_mean
    greedy = policy(params, obs, None, True)
    assert greedy.dtype == jnp.int32 and greedy.shape == (64,)
    np.testing.assert_array_equal(greedy, jnp.argmax(logits, -1))
    sampled = policy(params, obs, KEY, False)
    assert sampled.shape == (64,) and set(np.unique(sampled)) <= {0, 1}
    assert policy(params, obs[0], None, True).shape == ()


def test_actor_critic_continuous_mean_or_clipped_sample():
    trainer = _Trainer(ActorCritic(1, True, (8,)), "Pendulum-v1")
    policy, params = _policy(trainer), _params(trainer, 3)
    params = jax.tree.map(lambda x: x, params)
    params["params"]["log_std"] = jnp.array([2.0])  # wide: samples get clipped
    obs = jax.random.normal(KEY, (256, 3))
    mean = trainer.network.apply(params, obs).logits_or_mean
    greedy = policy(params, obs, None, True)  # jitted vs not: rounding differs
    np.testing.assert_allclose(greedy, jnp.clip(mean, -2, 2), rtol=1e-5, atol=1e-7)
    sampled = policy(params, obs, KEY, False)
    assert sampled.shape == (256, 1)
    assert np.all(np.abs(sampled) <= 2.0) and np.any(np.abs(sampled) == 2.0)


def test_q_network_greedy_or_epsilon_greedy_with_eps_end():
    trainer = _Trainer(QNetwork(2, (8,)), "CartPole-v1", eps_end=0.5)
    policy, params = _policy(trainer), _params(trainer, 4)
    obs = jax.random.normal(KEY, (4000, 4))
    greedy = jnp.argmax(trainer.network.apply(params, obs), -1)
    np.testing.assert_array_equal(policy(params, obs, None, True), greedy)
    explored = np.mean(np.asarray(policy(params, obs, KEY, False)) != greedy)
    assert 0.2 < explored < 0.3  # ε/2 of random actions differ from greedy
    no_eps = _policy(_Trainer(QNetwork(2, (8,)), "CartPole-v1"))
    np.testing.assert_array_equal(no_eps(params, obs, KEY, False), greedy)


class _Odd(nn.Module):
    @nn.compact
    def __call__(self, obs):
        return nn.Dense(3)(obs)  # 3 outputs for a 2-action env


def test_decided_by_the_network_output_not_the_name():
    with pytest.raises(TypeError, match="neither a PolicyOutput nor action values"):
        make_policy(_Trainer(_Odd(), "CartPole-v1"))


def test_the_core_imports_no_training_code_until_load_policy_is_used():
    code = (
        "import sys, ondevice_rl; "
        "assert not any(m.startswith('ondevice_rl.train') for m in sys.modules); "
        "ondevice_rl.load_policy; "
        "assert 'ondevice_rl.train.use.policy' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# --- a trained CartPole policy ---------------------------------------------------


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory):
    """PPO on CartPole, 150k env steps (≈490 deterministically), compiled
    without XLA's backend optimisation (faster to build, slower to run)."""
    out = tmp_path_factory.mktemp("policy") / "cartpole"
    config = get_algorithm("ppo").config(env="CartPole-v1", total_timesteps=150_000)
    saved = PROGRAMS.compiler_options
    PROGRAMS.compiler_options = {"xla_backend_optimization_level": 0}
    try:
        run_training(config, seed=0, out_dir=out, num_segments=1, progress=False)
    finally:
        PROGRAMS.compiler_options = saved
    return out


def test_load_policy_one_or_a_batch_jitted(cartpole):
    policy = ondevice_rl.load_policy(cartpole)
    assert policy.env == "CartPole-v1" and policy.obs_shape == (4,)
    one = policy(np.zeros(4, np.float32))
    assert one.shape == () and one.dtype == jnp.int32
    batch = policy(np.zeros((7, 4)))
    assert batch.shape == (7,) and np.all(batch == one)
    assert policy(np.zeros((7, 4)), jax.random.key(3)).shape == (7,)
    compiled = policy._greedy._cache_size()
    policy(np.ones((7, 4)))  # same shape: no new trace
    assert policy._greedy._cache_size() == compiled
    with pytest.raises(ValueError, match=r"expected \(4,\) or \[B, 4\]"):
        policy(np.zeros((2, 3)))


def test_gymnasium_scores_like_our_port(cartpole):
    policy = ondevice_rl.load_policy(cartpole)
    trainer = policy.run.trainer
    ours = jax.jit(
        lambda p, k: evaluate(make_policy(trainer), p, trainer.env, None, k, 200, True)
    )(policy.params, jax.random.key(1))["return"]
    theirs = run_in_gymnasium(policy, "CartPole-v1", episodes=20, seed=0)
    ours_mean, theirs_mean = float(np.mean(ours)), float(np.mean(theirs))
    print(f"CartPole deterministic: port {ours_mean:.1f}, gymnasium {theirs_mean:.1f}")
    assert ours_mean > 300  # it learned, so the comparison means something
    assert abs(ours_mean - theirs_mean) < 0.1 * ours_mean
