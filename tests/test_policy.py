"""One policy for every learner (train/use/policy.py), ``ondevice_rl.load_policy``
and the gymnasium cross-check of a trained CartPole policy."""

import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from suite_flags import fast_compiles

import ondevice_rl
from ondevice_rl.evaluation import evaluate
from ondevice_rl.train import get_algorithm
from ondevice_rl.train.run.runner import train_from_config
from ondevice_rl.train.use.policy import run_in_gymnasium

# Its module-scoped programs are built once: its tests share one xdist worker.
pytestmark = pytest.mark.xdist_group("policy")

KEY = jax.random.key(0)


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
    """PPO on CartPole, 75k env steps (≈420 deterministically), compiled
    without XLA's backend optimisation (faster to build, slower to run)."""
    out = tmp_path_factory.mktemp("policy") / "cartpole"
    config = get_algorithm("ppo").config(env="CartPole-v1", total_timesteps=75_000)
    with fast_compiles():
        train_from_config(config, seed=0, out_dir=out, num_segments=1, progress=False)
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
        lambda p, k: evaluate(trainer.policy, p, trainer.env, None, k, 200, True)
    )(policy.params, jax.random.key(1))["return"]
    theirs = run_in_gymnasium(policy, "CartPole-v1", episodes=20, seed=0)
    ours_mean, theirs_mean = float(np.mean(ours)), float(np.mean(theirs))
    print(f"CartPole deterministic: port {ours_mean:.1f}, gymnasium {theirs_mean:.1f}")
    assert ours_mean > 300  # it learned, so the comparison means something
    assert abs(ours_mean - theirs_mean) < 0.1 * ours_mean
