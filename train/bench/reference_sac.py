"""Reference point for SAC speed: a plain fused SAC loop on gymnax Pendulum-v1.

rejax's SAC (``rejax/algos/sac.py``: a replay-buffer mixin, a target-network
mixin, observation normalisation, ``train_iteration`` = collect one vector
step, extend the buffer, then under ``lax.cond`` once the buffer is filled
the three gradient steps, then a Polyak target update) in its structure,
written with flax and optax only (none of this project's code); every
hyperparameter a compile-time constant. rejax 0.1.3
itself installs beside jax 0.10.2 but does not run with gymnax 1.0.1, whose
``step`` returns terminated and truncated apart (six values; rejax unpacks
five). The gradient steps run critic, actor (on the updated critics), then
α, the order of the SAC paper's algorithm and of ``ondevice-rl``'s SAC;
rejax updates the actor first (on the critics before their step). Either
order does the same work.

The settings are ``ondevice-rl``'s SAC defaults (rejax's Pendulum settings
as the starting point): 1 env per seed; a buffer of 10,000; batches of 256;
uniform actions and no learning for the first 256 env steps; one gradient
step per env step; twin critics and a tanh-squashed Gaussian actor of
[64, 64] swish units; Adam 3e-3 after a global-norm clip at 100 for the
actor, the critics and log α (α starts at 1, target entropy −|A|); τ =
0.02; γ = 0.99; running observation statistics (updated with the
observations acted in, applied at sampling); time limits bootstrap from the
final observation.

    python -m ondevice_rl.train.bench.reference_sac --seeds 1 --timesteps 20000

Prints one JSON line: seeds, timesteps, compile_s, run_s, sps, final_return
(mean return of each seed's last 10 finished episodes, averaged; what
``ondevice-rl bench train --reference`` reads).
"""

import argparse
import json
import time
from typing import NamedTuple

import flax.linen as nn
import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import optax

HP = dict(buffer=10_000, batch=256, fill=256, lr=3e-3, clip=100.0, tau=0.02,
          gamma=0.99, hidden=(64, 64), log_std=(-10.0, 2.0))  # fmt: skip


class Actor(nn.Module):
    action_dim: int

    @nn.compact
    def __call__(self, obs):
        x = obs
        for width in HP["hidden"]:
            x = nn.swish(nn.Dense(width)(x))
        mean = nn.Dense(self.action_dim)(x)
        log_std = jnp.clip(nn.Dense(self.action_dim)(x), *HP["log_std"])
        return mean, log_std


class Critic(nn.Module):
    @nn.compact
    def __call__(self, obs, action):
        x = jnp.concatenate([obs, action], axis=-1)
        for width in HP["hidden"]:
            x = nn.swish(nn.Dense(width)(x))
        return nn.Dense(1)(x)[..., 0]


def sample(actor, params, obs, key):
    """A tanh-squashed Gaussian action in [-1, 1] and its log-density."""
    mean, log_std = actor.apply(params, obs)
    x = mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape)
    logp = -0.5 * ((x - mean) / jnp.exp(log_std)) ** 2 - log_std
    logp = logp - 0.5 * jnp.log(2 * jnp.pi) - jnp.log(1 - jnp.tanh(x) ** 2 + 1e-6)
    return jnp.tanh(x), logp.sum(-1)


class Buffer(NamedTuple):
    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    next_obs: jax.Array
    done: jax.Array  # terminated (not truncated)
    size: jax.Array
    pos: jax.Array


class Stats(NamedTuple):
    mean: jax.Array
    var: jax.Array
    count: jax.Array


def update_stats(s, x):
    count = s.count + 1
    delta = x - s.mean
    mean = s.mean + delta / count
    var = (s.var * s.count + delta**2 * s.count / count) / count
    return Stats(mean, var, count)


def normalize(s, x):
    return (x - s.mean) / jnp.sqrt(s.var + 1e-8)


#: ``bench launches``: the learning ``lax.cond`` in ``step`` is taken every
#: step once the buffer holds ``fill`` transitions.
CONDITIONALS_P_TRUE = {"step": [1.0]}


def num_updates(timesteps) -> int:
    """Updates of ``make_train(timesteps)``: one per env step."""
    return int(timesteps)


def make_train(timesteps):
    env, params = gymnax.make("Pendulum-v1")
    space = env.action_space(params)
    low, high = jnp.asarray(space.low), jnp.asarray(space.high)
    obs_dim, act_dim = env.observation_space(params).shape[0], space.shape[0]
    actor, critic = Actor(act_dim), Critic()
    twin = jax.vmap(critic.apply, in_axes=(0, None, None))
    tx = optax.chain(optax.clip_by_global_norm(HP["clip"]), optax.adam(HP["lr"]))

    def train(key):
        key, k_actor, k_critic, k_env = jax.random.split(key, 4)
        obs, env_state = env.reset(k_env, params)
        zeros_o, zeros_a = jnp.zeros(obs_dim), jnp.zeros(act_dim)
        pi = actor.init(k_actor, zeros_o)
        q = jax.vmap(critic.init, in_axes=(0, None, None))(
            jax.random.split(k_critic, 2), zeros_o, zeros_a
        )
        log_alpha = jnp.zeros(())
        opts = (tx.init(pi), tx.init(q), tx.init(log_alpha))
        n = HP["buffer"]
        buf = Buffer(jnp.zeros((n, obs_dim)), jnp.zeros((n, act_dim)), jnp.zeros(n),
                     jnp.zeros((n, obs_dim)), jnp.zeros(n), 0, 0)  # fmt: skip
        stats = Stats(jnp.zeros(obs_dim), jnp.ones(obs_dim), jnp.float32(1e-4))

        def update(nets, b, key):
            pi, q, q_target, log_alpha, opts = nets
            k_next, k_pi = jax.random.split(key)
            alpha = jnp.exp(log_alpha)
            a_next, logp_next = sample(actor, pi, b.next_obs, k_next)
            v_next = twin(q_target, b.next_obs, a_next).min(0) - alpha * logp_next
            y = b.reward + HP["gamma"] * (1.0 - b.done) * v_next

            def critic_loss(q):
                return 0.5 * ((twin(q, b.obs, b.action) - y) ** 2).mean(1).sum()

            u, opt_q = tx.update(jax.grad(critic_loss)(q), opts[1], q)
            q = optax.apply_updates(q, u)

            def actor_loss(pi):
                a, logp = sample(actor, pi, b.obs, k_pi)
                return (alpha * logp - twin(q, b.obs, a).min(0)).mean(), logp.mean()

            g, logp = jax.grad(actor_loss, has_aux=True)(pi)
            u, opt_pi = tx.update(g, opts[0], pi)
            pi = optax.apply_updates(pi, u)
            g = jax.grad(lambda la: -la * (logp + -act_dim))(log_alpha)
            u, opt_a = tx.update(g, opts[2], log_alpha)
            log_alpha = optax.apply_updates(log_alpha, u)
            q_target = jax.tree.map(
                lambda t, o: (1 - HP["tau"]) * t + HP["tau"] * o, q_target, q
            )
            return pi, q, q_target, log_alpha, (opt_pi, opt_q, opt_a)

        def step(carry, t):
            nets, buf, stats, env_state, obs, ep_ret, key = carry
            key, k_act, k_step, k_sample, k_update = jax.random.split(key, 5)
            random = jax.random.uniform(k_act, (act_dim,), minval=-1.0)
            policy, _ = sample(actor, nets[0], normalize(stats, obs), k_act)
            unit = jnp.where(t < HP["fill"], random, policy)
            action = low + (unit + 1.0) * (high - low) / 2
            next_obs, env_state, reward, term, trunc, info = env.step(
                k_step, env_state, action, params
            )
            final_obs = info["final_observation"]  # before gymnax's reset
            stats = update_stats(stats, obs)
            i = buf.pos
            row = (obs, unit, reward, final_obs, term.astype(jnp.float32))
            stored = [x.at[i].set(v) for x, v in zip(buf[:5], row, strict=True)]
            buf = Buffer(*stored, jnp.minimum(buf.size + 1, n), (i + 1) % n)

            def learn(nets):
                idx = jax.random.randint(k_sample, (HP["batch"],), 0, buf.size)
                obs, action, reward, next_obs, done = (x[idx] for x in buf[:5])
                b = Buffer(normalize(stats, obs), action, reward,
                           normalize(stats, next_obs), done, None, None)  # fmt: skip
                return update(nets, b, k_update)

            nets = jax.lax.cond(t + 1 >= HP["fill"], learn, lambda nets: nets, nets)
            ep_ret = ep_ret + reward
            done = jnp.logical_or(term, trunc)
            finished = jnp.where(done, ep_ret, jnp.nan)
            ep_ret = jnp.where(done, 0.0, ep_ret)
            return (nets, buf, stats, env_state, next_obs, ep_ret, key), finished

        nets = (pi, q, q, log_alpha, opts)
        carry = (nets, buf, stats, env_state, obs, jnp.float32(0.0), key)
        _, finished = jax.lax.scan(step, carry, jnp.arange(timesteps))
        return finished  # [timesteps], NaN where no episode ended

    return train


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--timesteps", type=float, default=2e4)
    a = p.parse_args()
    steps = int(a.timesteps)
    keys = jax.random.split(jax.random.PRNGKey(0), a.seeds)
    t0 = time.perf_counter()
    fn = jax.jit(jax.vmap(make_train(steps))).lower(keys).compile()
    t1 = time.perf_counter()
    finished = np.asarray(jax.block_until_ready(fn(keys)))  # [S, steps]
    t2 = time.perf_counter()
    last = [row[~np.isnan(row)][-10:] for row in finished]
    final = float(np.mean([x.mean() for x in last if len(x)]))
    print(json.dumps(dict(seeds=a.seeds, timesteps=steps * a.seeds,
                          compile_s=round(t1 - t0, 3), run_s=round(t2 - t1, 3),
                          sps=round(steps * a.seeds / (t2 - t1)),
                          final_return=round(final, 1))))  # fmt: skip


if __name__ == "__main__":
    main()
