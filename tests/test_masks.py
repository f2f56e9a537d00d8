"""Action masks (ondevice_rl/env/masks.py): honoured wherever a discrete action is
chosen or valued — masked logits (PPO, A2C) in acting and in the loss, masked
argmax and ε-greedy (DQN, PQN), the bootstrap's max over the next state's
legal actions, and eval, load_policy and the policy surface. Probe-Mask-v0:
the action a learner would pick without the mask is illegal."""

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ondevice_rl.env.masks import ACTION_MASK, MASKED, mask_output, split_action_mask
from ondevice_rl.env.wrappers import Wrapper
from ondevice_rl.envs.probes import ProbeMask
from ondevice_rl.evaluation import evaluate
from ondevice_rl.nn.networks import PolicyOutput, entropy, log_prob, sample_action
from ondevice_rl.rollout import Transition
from ondevice_rl.train import get_algorithm
from ondevice_rl.train.dqn.loss import bootstrap_values, td_targets
from ondevice_rl.train.kit.agent import apply_masked, build_agent
from ondevice_rl.train.kit.env_setup import make_env
from ondevice_rl.train.kit.state import policy_params
from ondevice_rl.train.use.loading import LoadedRun
from ondevice_rl.train.use.policy import Policy

KEY = jax.random.key(0)
GAMMA = 0.9
FULL, RESTRICTED = [True, True, True], [False, True, True]


def second_step(masks):
    """Probe-Mask-v0's second-step observations with the given masks."""
    mask = jnp.asarray(masks, jnp.bool_)
    stage = jnp.ones(mask.shape[:-1] + (1,), jnp.float32)
    return {"stage": stage, ACTION_MASK: mask}


def test_masked_distribution_is_the_legal_actions_renormalised():
    pi = PolicyOutput(jnp.array([1.0, 2.0, 3.0]), None, jnp.float32(0.0))
    masked = mask_output(pi, jnp.array([True, False, True]))
    legal = jax.nn.log_softmax(jnp.array([1.0, 3.0]))
    np.testing.assert_allclose(log_prob(masked, 0), legal[0], rtol=1e-6)
    np.testing.assert_allclose(log_prob(masked, 2), legal[1], rtol=1e-6)
    np.testing.assert_allclose(entropy(masked), -jnp.sum(jnp.exp(legal) * legal))
    assert log_prob(masked, 1) < -1e30 and np.isfinite(log_prob(masked, 1))
    samples = sample_action(KEY, masked._replace(
        logits_or_mean=jnp.broadcast_to(masked.logits_or_mean, (2000, 3))
    ))  # fmt: skip
    assert set(np.unique(samples)) == {0, 2}
    # A mask that allows nothing (a terminal state's) allows everything.
    values = jnp.array([4.0, 5.0])
    np.testing.assert_array_equal(mask_output(values, jnp.zeros(2, bool)), values)
    assert float(mask_output(values, jnp.array([True, False]))[1]) == MASKED


def test_bootstrap_is_the_next_states_legal_max_by_hand():
    """DQN's targets from a masked next state: ``r + γ·max_legal Q'``, and
    double DQN's online argmax over legal actions too."""
    q_target = jnp.array([[[5.0, 1.0, 2.0], [0.0, 4.0, 3.0]]])  # [n=1, M=2, A]
    q_online = jnp.array([[[9.0, 0.0, 3.0], [1.0, 2.0, 0.0]]])
    mask = jnp.array([[RESTRICTED, [False, False, False]]])  # none legal: all

    def apply(q, obs):  # a "network" that outputs the given values
        return q

    next_obs = {"stage": jnp.zeros((1, 2, 1)), ACTION_MASK: mask}
    q_next = apply_masked(apply, q_target, next_obs)
    q_online_next = apply_masked(apply, q_online, next_obs)
    np.testing.assert_array_equal(bootstrap_values(q_next), [[2.0, 4.0]])
    np.testing.assert_array_equal(bootstrap_values(q_next, q_online_next), [[2.0, 4.0]])
    flags = jnp.zeros((1, 2), bool)
    seq = Transition(None, None, jnp.array([[1.0, 0.5]]), flags, flags, None, ())
    targets = td_targets(seq, bootstrap_values(q_next), jnp.float32(GAMMA), 1)
    np.testing.assert_allclose(targets, [1.0 + GAMMA * 2.0, 0.5 + GAMMA * 4.0])
    # Unmasked, the same numbers would bootstrap from 5 and 4.
    np.testing.assert_array_equal(bootstrap_values(q_target), [[5.0, 4.0]])


@pytest.fixture(scope="module")
def mask_setup():
    return make_env("Probe-Mask-v0")


def test_agent_strips_the_mask_and_masks_its_output(mask_setup):
    assert mask_setup.action_mask and mask_setup.obs_shape is None
    config = get_algorithm("pqn").config(env="Probe-Mask-v0", hidden=(8,))
    agent = build_agent(mask_setup, config, "q")
    params = jax.jit(agent.init)(KEY)
    obs = second_step([FULL, RESTRICTED])
    _, q = agent.step(params, (), obs, None)
    plain = agent.network.apply(params, split_action_mask(obs)[0])
    np.testing.assert_array_equal(q[0], plain[0])
    assert float(q[1, 0]) == MASKED
    np.testing.assert_array_equal(q[1, 1:], plain[1, 1:])


def test_pqn_learns_the_legal_optimum_and_its_policy_stays_legal():
    """PQN on Probe-Mask-v0 with one-step targets (q_lambda 0), γ 0.9: the
    legal optimum, values bootstrapped over legal actions; then
    ``load_policy``'s ``Policy`` (greedy and sampled) honours the
    observation's mask and an explicit one on top, and evaluation on the
    device pays 2 or 1 per episode, never the illegal action's −1. (One
    test, one compile: xdist would build a shared fixture once per worker.)"""
    algo = get_algorithm("pqn")
    config = algo.config(
        env="Probe-Mask-v0", num_envs=16, num_steps=2, total_timesteps=16 * 2 * 600,
        hidden=(16,), exploration_steps=2000, update_epochs=1, num_minibatches=1,
        q_lambda=0.0, gamma=GAMMA, learning_rate=3e-3,
    )  # fmt: skip
    out = jax.jit(algo.make_train(config))(KEY, config.hyperparams)
    trainer = algo.make_trainer(config)
    assert float(jnp.mean(out.metrics["episode_return"][-10:])) > 1.35  # ignoring: ≤ 1
    net, params = trainer.network, out.state.params
    # V(start) = γ·(½·2 + ½·1) = 1.35; over every action's value it would
    # be 2γ = 1.8.
    q_start = net.apply(params, {"stage": jnp.zeros((1,))})
    np.testing.assert_allclose(q_start, ProbeMask.OPTIMAL_RETURN * GAMMA, atol=0.15)
    q_second = net.apply(params, {"stage": jnp.ones((1,))})
    np.testing.assert_allclose(q_second[:2], [2.0, 1.0], atol=0.1)

    params = policy_params(out.state)
    policy = Policy(LoadedRun(SimpleNamespace(config=config), trainer, params, 0))
    assert int(policy(second_step(FULL))) == 0
    assert int(policy(second_step(RESTRICTED))) == 1
    assert int(policy(second_step(RESTRICTED), mask=[True, False, True])) == 2
    np.testing.assert_array_equal(policy(second_step([FULL, RESTRICTED])), [0, 1])
    sampled = policy(second_step([RESTRICTED] * 500), KEY)  # ε-greedy, ε = 0.05
    assert not np.any(sampled == 0) and np.any(sampled == 2)
    returns = jax.jit(
        lambda p, k: evaluate(trainer.policy, p, trainer.env, None, k, 32, True)
    )(params, KEY)["return"]
    assert set(np.unique(returns)) == {1.0, 2.0}


def test_ppo_masks_logits_alike_in_acting_and_in_its_loss():
    """One epoch of one minibatch: the loss's log-probabilities are taken
    with the parameters that acted, so the ratio is 1 (approx_kl 0) only if
    the loss masks as acting did. It learns the legal optimum, and its
    policy samples legal actions only."""
    algo = get_algorithm("ppo")
    config = algo.config(
        env="Probe-Mask-v0", num_envs=16, num_steps=2, total_timesteps=16 * 2 * 150,
        hidden=(16,), update_epochs=1, num_minibatches=1, lr_schedule="constant",
        gamma=GAMMA, learning_rate=1e-2,
    )  # fmt: skip
    out = jax.jit(algo.make_train(config))(KEY, config.hyperparams)
    assert float(jnp.max(jnp.abs(out.metrics["approx_kl"]))) < 1e-7
    assert float(jnp.mean(out.metrics["episode_return"][-10:])) > 1.3
    policy = algo.make_trainer(config).policy
    restricted = second_step([RESTRICTED] * 500)
    params = policy_params(out.state)
    sampled, _ = policy(params, (), restricted, KEY, False)
    assert not np.any(sampled == 0)
    only, _ = policy(params, (), restricted, KEY, False, jnp.array([True, False, True]))
    assert np.all(only == 2)


class IgnoreMask(Wrapper):
    """Probe-Mask-v0 without its mask: a learner that cannot honour it."""

    def reset(self, key, params):
        obs, state = self.env.reset(key, params)
        return split_action_mask(obs)[0], state

    def step(self, key, state, action, params):
        ts = self.env.step(key, state, action, params)
        return ts._replace(obs=split_action_mask(ts.obs)[0])

    def observation_space(self, params):
        return split_action_mask(self.env.observation_space(params))[0]


def mask_ignored():
    return IgnoreMask(ProbeMask())


SLOW_CONFIGS = {
    "ppo": dict(num_envs=16, num_steps=2, update_epochs=1, num_minibatches=1,
                lr_schedule="constant", learning_rate=1e-2),
    "a2c": dict(num_envs=16, num_steps=2, learning_rate=1e-2),
    "pqn": dict(num_envs=16, num_steps=2, update_epochs=1, num_minibatches=1,
                exploration_steps=2000, learning_rate=3e-3),
    "dqn": dict(num_envs=4, buffer_size=2000, batch_size=32, learning_starts=200,
                exploration_steps=2000, target_update_every=100),
}  # fmt: skip
# With a recurrent core: the mask applied to the unrolled outputs as well.
for _name in ("ppo", "pqn"):
    SLOW_CONFIGS[f"{_name}-gru"] = dict(
        SLOW_CONFIGS[_name], memory="gru", memory_size=16
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SLOW_CONFIGS))
def test_honouring_the_mask_scores_above_ignoring_it(name):
    """Every discrete learner reaches the legal optimum (1.5) and scores
    above the same learner without the mask (at best 1: the illegal action
    pays −1 in the restricted state, which it cannot tell apart)."""
    algo = get_algorithm(name.split("-")[0])
    finals = {}
    for env in ("Probe-Mask-v0", "test_masks:mask_ignored"):
        config = algo.config(
            env=env, hidden=(16,), total_timesteps=9600, gamma=GAMMA,
            **SLOW_CONFIGS[name],
        )  # fmt: skip
        out = jax.jit(algo.make_train(config))(KEY, config.hyperparams)
        finals[env] = float(jnp.mean(out.metrics["episode_return"][-10:]))
    print(name, finals)
    assert finals["Probe-Mask-v0"] > 1.35
    assert finals["test_masks:mask_ignored"] < 1.1
