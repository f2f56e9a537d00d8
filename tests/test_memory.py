"""Recurrent policies (``memory="gru"``/``"lstm"``) for PPO, A2C and PQN:
probes that need memory, the carry through rollouts, losses, truncation
bootstraps and evaluation (resume: ``tests/test_resume.py``)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from suite_flags import OPTIMISED

from ondevice_rl import make
from ondevice_rl.evaluation import evaluate
from ondevice_rl.metrics import final_return
from ondevice_rl.rollout import batch_reset, rollout
from ondevice_rl.train import get_algorithm
from ondevice_rl.train.kit.agent import build_agent, carry_at
from ondevice_rl.train.kit.env_setup import make_env
from ondevice_rl.train.kit.on_policy import Memory, bootstrap_outputs
from ondevice_rl.train.kit.state import policy_params

# Its tests share the trained runs (``_trained``): one xdist worker.
pytestmark = pytest.mark.xdist_group("memory")

# Keys these probes were not tuned on (they were set on split(PRNGKey(0), 2)).
SEEDS = jnp.stack([jax.random.key(s) for s in range(100, 104)])
PROBE = {
    "ppo": dict(num_minibatches=4, update_epochs=4, learning_rate=3e-3),
    "a2c": dict(learning_rate=3e-3, optimizer="adam"),
    "pqn": dict(
        num_minibatches=4,
        update_epochs=4,
        learning_rate=3e-3,
        exploration_steps=7_500,
        eps_end=0.01,
        lr_schedule="constant",
    ),
}


#: Env steps per run (PPO's gru run: ~1.0 by 15k, with margin over 0.95).
TOTAL = {"ppo": 15_000, "a2c": 30_000, "pqn": 30_000}


def _probe_config(name, memory, total=None):
    return get_algorithm(name).config(
        env="Probe-Memory-v0",
        memory=memory,
        memory_size=32,
        hidden=(32,),
        num_envs=16,
        num_steps=12,
        total_timesteps=total or TOTAL[name],
        gamma=0.9,
        **PROBE[name],
    )


@functools.cache
def _trained(name, memory):
    # Optimised: PPO's 4 GRU runs of 15k steps compile as fast and run in
    # 1.4 s instead of 6.9 s.
    config = _probe_config(name, memory)
    train = jax.vmap(get_algorithm(name).make_train(config), in_axes=(0, None))
    return config, jax.jit(train, compiler_options=OPTIMISED)(SEEDS, config.hyperparams)


@pytest.mark.parametrize(
    "name",
    ["ppo", "a2c", "pqn"],
)
@pytest.mark.slow  # a learning check; the default suite keeps the recurrent
# program's checks below and test_golden's pinned GRU PPO numbers
def test_cue_after_a_delay_needs_memory(name):
    # One of 2 cues, the reward for the matching action 5 steps later.
    _, ff = _trained(name, "none")
    _, gru = _trained(name, "gru")
    assert np.all(final_return(np.asarray(ff.metrics["episode_return"])) <= 0.55)
    assert np.all(final_return(np.asarray(gru.metrics["episode_return"])) >= 0.95)


def test_gru_ppo_remembers_on_4_fresh_keys_and_evaluation_carries_the_memory():
    # Keys 100-103 (never used to tune the probe): each run learns to act on
    # the cue 5 steps back (chance is 0.5), and greedy evaluation of the
    # first, its GRU carried from step to step, always does.
    config, out = _trained("ppo", "gru")
    finals = final_return(np.asarray(out.metrics["episode_return"]))
    assert finals.shape == (4,) and np.all(finals >= 0.95), finals
    trainer = get_algorithm("ppo").make_trainer(config)
    params = jax.tree.map(lambda x: x[0], policy_params(out.state))
    result = jax.jit(
        lambda p, k: evaluate(
            trainer.policy,
            p,
            trainer.env,
            None,
            k,
            32,
            True,
            trainer.initial_carry((32,)),
        )  # fmt: skip
    )(params, jax.random.key(5))
    np.testing.assert_array_equal(result["return"], 1.0)


def test_gru_is_flax_gru_cell():
    """``GRU`` has ``nn.GRUCell``'s parameters (names, shapes, initial values
    bit for bit) and computes its step: checkpoints and init are unchanged."""
    import flax.linen as nn

    from ondevice_rl.nn.recurrent import GRU

    init = nn.initializers.orthogonal()
    ours, flax_cell = GRU(16, init), nn.GRUCell(16, recurrent_kernel_init=init)
    h = jax.random.normal(jax.random.key(1), (3, 16))
    x = jax.random.normal(jax.random.key(2), (3, 5))
    params = flax_cell.init(jax.random.key(0), h, x)
    initial = ours.init(jax.random.key(0), h, x)
    assert jax.tree.structure(initial) == jax.tree.structure(params)
    jax.tree.map(np.testing.assert_array_equal, initial, params)
    np.testing.assert_allclose(
        ours.apply(params, h, x)[0],
        flax_cell.apply(params, h, x)[0],
        rtol=1e-6,
        atol=1e-6,
    )


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_sequences_replay_from_the_stored_carry(kind):
    """The loss's unroll over a stored rollout gives the outputs it was
    acted with: the carry starts afresh where an episode starts."""
    config = get_algorithm("ppo").config(
        env="Probe-Memory-v0", memory=kind, memory_size=8, hidden=(8,)
    )
    setup = make_env(config.env)
    agent = build_agent(setup, config, "actor_critic")
    params = agent.init(jax.random.key(0))
    state = batch_reset(setup.env, setup.default_params, jax.random.key(1), 3)
    state = state._replace(agent=agent.initial_carry((3,)))

    def act(params, obs, key, carry, first):
        next_carry, pi = agent.step(params, carry, obs, first)
        return (
            jnp.argmax(pi.logits_or_mean, -1),
            None,
            (pi.value, first, carry),
            next_carry,
        )

    state, traj, episodes = jax.jit(
        lambda s: rollout(setup.env, setup.default_params, act, params, s, 20, True)
    )(state)
    value, first, carries = traj.extras
    assert np.all(first[0]) and np.any(first[1:]) and np.any(~first[1:])
    np.testing.assert_array_equal(first[1:], episodes.done[:-1])
    replayed = jax.jit(agent.unroll)(params, carry_at(carries), traj.obs, first)
    np.testing.assert_allclose(replayed.value, value, rtol=1e-5, atol=1e-6)


def test_truncation_bootstraps_with_the_episodes_memory():
    """At a time limit, V(final obs) is taken from the carry the episode
    built (replayed here step by step from the stored start), not from a
    fresh one, which could not know the cue."""
    config = get_algorithm("ppo").config(
        env="Probe-MemoryTruncation-v0", memory="gru", memory_size=8, hidden=(8,),
        num_envs=4, num_steps=12,
    )  # fmt: skip
    trainer = get_algorithm("ppo").make_trainer(config)
    agent = build_agent(trainer.setup, config, "actor_critic")
    state = jax.jit(trainer.init)(jax.random.key(0), config.hyperparams)
    params, setup = state.params, trainer.setup

    def act(params, obs, key, carry, first):
        next_carry, pi = agent.step(params, carry, obs, first)
        action = jnp.argmax(pi.logits_or_mean, -1)
        return action, action, Memory(first, carry, next_carry), next_carry

    @jax.jit  # compiled, not op by op: the same numbers, cheaper
    def collect(params, rollout_state):
        _, traj, _ = rollout(
            setup.env, setup.default_params, act, params, rollout_state, 12, True
        )
        traj = traj._replace(extras=((), traj.extras))
        return traj, bootstrap_outputs(agent, params, traj).value  # [T, B]

    traj, final = collect(params, state.rollout)
    truncated = np.asarray(traj.truncated)
    assert truncated.any()
    memory = traj.extras[1]
    carry = carry_at(memory.carry)
    step = jax.jit(agent.step)
    for t in range(12):  # the episode's carry after step t, replayed
        carry, _ = step(params, carry, traj.obs[t], memory.first[t])
        _, own = step(params, carry, traj.final_obs[t], None)
        _, fresh = step(params, agent.initial_carry((4,)), traj.final_obs[t], None)
        cut = truncated[t]
        if cut.any():
            np.testing.assert_allclose(final[t][cut], own.value[cut], rtol=1e-5)
            assert not np.allclose(final[t][cut], fresh.value[cut])


def test_pomdp_variants_keep_positions_only():
    full, params = make("CartPole-v1")
    novel, _ = make("CartPole-NoVel-v1")
    key = jax.random.key(0)
    obs, _ = full.reset(key, params)
    masked, _ = novel.reset(key, params)
    np.testing.assert_array_equal(masked, obs[jnp.array([0, 2])])
    assert novel.observation_space(params).shape == (2,)
    pendulum, pendulum_params = make("Pendulum-NoVel-v1")
    assert pendulum.observation_space(pendulum_params).shape == (2,)


def test_load_policy_keeps_the_carry_within_an_episode():
    from types import SimpleNamespace

    from ondevice_rl.train.use.loading import LoadedRun
    from ondevice_rl.train.use.policy import Policy

    config, out = _trained("ppo", "gru")
    trainer = get_algorithm("ppo").make_trainer(config)
    params = jax.tree.map(lambda x: x[0], policy_params(out.state))
    policy = Policy(LoadedRun(SimpleNamespace(config=config), trainer, params, 0))
    env, env_params = make("Probe-Memory-v0")
    step = jax.jit(env.step)

    def episode_return(key, forget):
        obs, state = env.reset(key, env_params)
        policy.reset()
        total = 0.0
        for _ in range(6):
            if forget:
                policy.reset()
            ts = step(key, state, policy(obs), env_params)
            obs, state, total = ts.obs, ts.state, total + float(ts.reward)
        return total

    keys = jax.random.split(jax.random.key(3), 16)
    assert [episode_return(k, False) for k in keys] == [1.0] * 16
    assert sum(episode_return(k, True) for k in keys) < 14  # chance is 8


def test_recurrent_program_is_host_silent_deterministic_and_traced(name="pqn"):
    """A compiled population program with memory (the kit's one scaffold
    serves PPO, A2C and PQN alike): no host traffic in it, runs under the
    transfer guard, same key → same bits, new traced values → no recompile
    and other numbers."""
    config = _probe_config(name, "gru", total=4 * 16 * 12)
    train = jax.jit(jax.vmap(get_algorithm(name).make_train(config)))
    hp = jax.tree.map(lambda x: jnp.stack([x, x]), config.hyperparams)
    text = train.lower(SEEDS[:2], hp).as_text().lower()
    assert not [
        m for m in ("callback", "infeed", "outfeed", "send", "recv") if m in text
    ]
    seeds, hp = jax.device_put((SEEDS[:2], hp))
    first = jax.device_get(train(seeds, hp).metrics)
    with jax.transfer_guard("disallow"):
        again = jax.block_until_ready(train(seeds, hp).metrics)
    for key in first:
        np.testing.assert_array_equal(first[key], np.asarray(again[key]))
    other = hp._replace(learning_rate=hp.learning_rate * 3, gamma=hp.gamma * 0.5)
    changed = jax.device_get(train(seeds, jax.device_put(other)).metrics)
    assert train._cache_size() == 1
    loss = "td_loss" if name == "pqn" else "total_loss"
    assert not np.array_equal(first[loss], changed[loss])
