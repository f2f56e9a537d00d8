"""Reference point for recurrent PPO speed: a plain fused PPO-GRU loop.

The textbook single-jit design of PureJaxRL's ``ppo_rnn.py``, written with
flax and optax only (none of this project's code): gymnax CartPole-v1 with
its velocities hidden (position and angle observed, as ``CartPole-NoVel-v1``),
a ReLU embedding of 128, a scanned GRU cell of 128 reset at episode starts,
actor and critic heads of one 128-unit ReLU layer; 4 envs × 128 steps, 4
epochs × 4 minibatches split over environments, Adam 2.5e-4 annealed, every
hyperparameter a compile-time constant.

    python -m ondevice_rl.train.bench.reference_ppo_rnn --seeds 1 --timesteps 500000

Prints one JSON line: seeds, timesteps, compile_s, run_s, sps, final_return
(what ``ondevice-rl bench train --reference`` reads).
"""

import argparse
import functools
import json
import time
from typing import NamedTuple

import flax.linen as nn
import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import optax

HP = dict(lr=2.5e-4, num_envs=4, num_steps=128, epochs=4, minibatches=4, size=128,
          gamma=0.99, lam=0.95, clip=0.2, ent=0.01, vf=0.5, max_grad=0.5)  # fmt: skip
KEEP = jnp.array([0, 2])  # cart position, pole angle


class ScannedGRU(nn.Module):
    @functools.partial(
        nn.scan, variable_broadcast="params", in_axes=0, out_axes=0,
        split_rngs={"params": False},
    )  # fmt: skip
    @nn.compact
    def __call__(self, h, inputs):
        x, reset = inputs
        h = jnp.where(reset[:, None], jnp.zeros_like(h), h)
        return nn.GRUCell(HP["size"])(h, x)


class ActorCriticRNN(nn.Module):
    num_actions: int

    @nn.compact
    def __call__(self, h, obs, reset):
        """``obs`` ``[T, B, O]``, ``reset`` ``[T, B]`` -> h, logits, value."""
        orth = nn.initializers.orthogonal
        x = nn.relu(nn.Dense(HP["size"], kernel_init=orth(np.sqrt(2)))(obs))
        h, x = ScannedGRU()(h, (x, reset))
        a = nn.relu(nn.Dense(HP["size"], kernel_init=orth(np.sqrt(2)))(x))
        logits = nn.Dense(self.num_actions, kernel_init=orth(0.01))(a)
        c = nn.relu(nn.Dense(HP["size"], kernel_init=orth(np.sqrt(2)))(x))
        return h, logits, nn.Dense(1, kernel_init=orth(1.0))(c)[..., 0]


class Batch(NamedTuple):
    obs: jax.Array
    reset: jax.Array
    action: jax.Array
    logp: jax.Array
    value: jax.Array
    reward: jax.Array
    done: jax.Array
    ep_return: jax.Array


def num_updates(total_timesteps) -> int:
    """Updates of ``make_train(total_timesteps)`` (its outer loop's length)."""
    return int(total_timesteps) // (HP["num_steps"] * HP["num_envs"])


def make_train(total_timesteps):
    env, env_params = gymnax.make("CartPole-v1")
    n_act = env.action_space(env_params).n
    B, T = HP["num_envs"], HP["num_steps"]
    n_updates = int(total_timesteps) // T // B
    net = ActorCriticRNN(n_act)

    def train(key):
        k_net, k_env, key = jax.random.split(key, 3)
        h0 = jnp.zeros((B, HP["size"]))
        params = net.init(k_net, h0, jnp.zeros((1, B, 2)), jnp.zeros((1, B), bool))
        per_update = HP["epochs"] * HP["minibatches"]
        sched = lambda c: HP["lr"] * (1 - (c // per_update) / n_updates)  # noqa: E731
        tx = optax.chain(optax.clip_by_global_norm(HP["max_grad"]),
                         optax.adam(sched, eps=1e-5))  # fmt: skip
        opt = tx.init(params)
        obs, st = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(k_env, B), env_params)  # fmt: skip
        obs = obs[:, KEEP]
        done = jnp.ones(B, bool)

        def env_step(carry, _):
            params, h, obs, done, st, ep_ret, key = carry
            key, k_a, k_s = jax.random.split(key, 3)
            h2, logits, value = net.apply(params, h, obs[None], done[None])
            logits, value = logits[0], value[0]
            action = jax.random.categorical(k_a, logits)
            logp = jax.nn.log_softmax(logits)[jnp.arange(B), action]
            obs2, st2, r, term, trunc, _ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                jax.random.split(k_s, B), st, action, env_params)  # fmt: skip
            d = jnp.logical_or(term, trunc)
            ep_ret = ep_ret + r
            out = Batch(obs, done, action, logp, value, r, d,
                        jnp.where(d, ep_ret, jnp.nan))  # fmt: skip
            carry = (params, h2, obs2[:, KEEP], d, st2, jnp.where(d, 0.0, ep_ret), key)
            return carry, out

        def loss_fn(params, h, b, adv, target):
            _, logits, value = net.apply(params, h, b.obs, b.reset)
            logp_all = jax.nn.log_softmax(logits)
            logp = jnp.take_along_axis(logp_all, b.action[..., None], -1)[..., 0]
            v_clip = b.value + jnp.clip(value - b.value, -HP["clip"], HP["clip"])
            v_loss = (
                0.5 * jnp.maximum((value - target) ** 2, (v_clip - target) ** 2).mean()
            )
            ratio = jnp.exp(logp - b.logp)
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            clipped = jnp.clip(ratio, 1 - HP["clip"], 1 + HP["clip"])
            pg = -jnp.minimum(ratio * adv, clipped * adv).mean()
            ent = -(jnp.exp(logp_all) * logp_all).sum(-1).mean()
            return pg + HP["vf"] * v_loss - HP["ent"] * ent

        def update(carry, _):
            params, opt, h, obs, done, st, ep_ret, key = carry
            h_start = h
            (params, h, obs, done, st, ep_ret, key), traj = jax.lax.scan(
                env_step, (params, h, obs, done, st, ep_ret, key), None, T
            )
            _, _, last_v = net.apply(params, h, obs[None], done[None])
            last_v = last_v[0]

            def gae_step(c, t):
                gae, next_v = c
                delta = t.reward + HP["gamma"] * next_v * (1 - t.done) - t.value
                gae = delta + HP["gamma"] * HP["lam"] * (1 - t.done) * gae
                return (gae, t.value), gae

            _, adv = jax.lax.scan(gae_step, (jnp.zeros_like(last_v), last_v), traj,
                                  reverse=True, unroll=16)  # fmt: skip
            target = adv + traj.value

            def epoch(c, _):
                params, opt, key = c
                key, k = jax.random.split(key)
                perm = jax.random.permutation(k, B)
                m = B // HP["minibatches"]
                shuffled = jax.tree.map(lambda x: jnp.take(x, perm, 1),
                                        (traj, adv, target))  # fmt: skip
                mbs = jax.tree.map(
                    lambda x: jnp.swapaxes(x.reshape((T, HP["minibatches"], m)
                                                     + x.shape[2:]), 0, 1),
                    shuffled)  # fmt: skip
                hs = jnp.take(h_start, perm, 0).reshape((HP["minibatches"], m, -1))

                def mb(c, data):
                    params, opt = c
                    h, (b, a, tgt) = data
                    g = jax.grad(loss_fn)(params, h, b, a, tgt)
                    upd, opt = tx.update(g, opt)
                    return (optax.apply_updates(params, upd), opt), None

                (params, opt), _ = jax.lax.scan(mb, (params, opt), (hs, mbs))
                return (params, opt, key), None

            (params, opt, key), _ = jax.lax.scan(
                epoch, (params, opt, key), None, HP["epochs"])  # fmt: skip
            ret = jnp.nanmean(traj.ep_return)
            return (params, opt, h, obs, done, st, ep_ret, key), ret

        init = (params, opt, h0, obs, done, st, jnp.zeros(B), key)
        _, returns = jax.lax.scan(update, init, None, n_updates)
        return returns

    return train


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--timesteps", type=float, default=5e5)
    a = p.parse_args()
    keys = jax.random.split(jax.random.PRNGKey(0), a.seeds)
    t0 = time.perf_counter()
    fn = jax.jit(jax.vmap(make_train(a.timesteps))).lower(keys).compile()
    t1 = time.perf_counter()
    rets = jax.block_until_ready(fn(keys))
    t2 = time.perf_counter()
    per = HP["num_steps"] * HP["num_envs"]
    steps = a.seeds * (int(a.timesteps) // per) * per
    final = float(np.nanmean(np.asarray(rets)[:, -10:]))
    print(json.dumps(dict(seeds=a.seeds, timesteps=steps, compile_s=round(t1 - t0, 3),
                          run_s=round(t2 - t1, 3), sps=round(steps / (t2 - t1)),
                          final_return=round(final, 1))))  # fmt: skip


if __name__ == "__main__":
    main()
