"""Reference point for PPO speed: a plain fused PPO loop on gymnax CartPole-v1.

The textbook single-jit design of PureJaxRL's ``ppo.py``: every
hyperparameter a compile-time constant, one PRNG key split per environment
per step, GAE by a reverse ``lax.scan`` unrolled by 16, a full-batch shuffle
every epoch, gymnax's auto-reset that computes a reset on every step. Written
with jax, optax and gymnax only (none of this project's code). Our benches run
it beside ``ondevice-rl``'s PPO in one invocation, so a speed claim is a ratio
taken on the same machine (``bench train --reference``), and so is a launch
count (``bench launches``).

Settings (our PPO's CartPole defaults): 4 envs x 128 steps, 4 epochs x 4
minibatches, Adam 2.5e-4 annealed linearly, a global-norm clip at 0.5,
gamma 0.99, lambda 0.95, clip 0.2, entropy 0.01, value 0.5; separate actor
and critic MLPs of [64, 64] tanh units.

    python -m ondevice_rl.train.bench.reference_ppo --seeds 1 --timesteps 500000

Prints one JSON line: seeds, timesteps, compile_s, run_s, sps, final_return.
"""

import argparse
import json
import time
from typing import NamedTuple

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import optax

HP = dict(
    lr=2.5e-4,
    num_envs=4,
    num_steps=128,
    epochs=4,
    minibatches=4,
    gamma=0.99,
    lam=0.95,
    clip=0.2,
    ent=0.01,
    vf=0.5,
    max_grad=0.5,
)


def mlp_init(key, sizes, last_scale):
    params = []
    keys = jax.random.split(key, len(sizes) - 1)
    for i, (k, n_in, n_out) in enumerate(zip(keys, sizes[:-1], sizes[1:], strict=True)):
        scale = last_scale if i == len(sizes) - 2 else np.sqrt(2)
        w = jax.nn.initializers.orthogonal(scale)(k, (n_in, n_out))
        params.append((w, jnp.zeros(n_out)))
    return params


def mlp_apply(params, x):
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = params[-1]
    return x @ w + b


class Batch(NamedTuple):
    obs: jax.Array
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
    obs_dim = env.observation_space(env_params).shape[0]
    n_updates = int(total_timesteps) // HP["num_steps"] // HP["num_envs"]
    batch = HP["num_steps"] * HP["num_envs"]

    def policy(params, obs):
        logits = mlp_apply(params["pi"], obs)
        value = mlp_apply(params["v"], obs)[..., 0]
        return logits, value

    def train(key):
        k_pi, k_v, k_env, key = jax.random.split(key, 4)
        params = {
            "pi": mlp_init(k_pi, [obs_dim, 64, 64, n_act], 0.01),
            "v": mlp_init(k_v, [obs_dim, 64, 64, 1], 1.0),
        }
        sched = lambda c: (  # noqa: E731
            HP["lr"] * (1 - (c // (HP["epochs"] * HP["minibatches"])) / n_updates)
        )
        tx = optax.chain(
            optax.clip_by_global_norm(HP["max_grad"]), optax.adam(sched, eps=1e-5)
        )
        opt = tx.init(params)
        obs, st = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(k_env, HP["num_envs"]), env_params
        )
        ep_ret = jnp.zeros(HP["num_envs"])

        def env_step(carry, _):
            params, obs, st, ep_ret, key = carry
            key, k_a, k_s = jax.random.split(key, 3)
            logits, value = policy(params, obs)
            action = jax.random.categorical(k_a, logits)
            logp = jax.nn.log_softmax(logits)[jnp.arange(HP["num_envs"]), action]
            obs2, st2, r, term, trunc, _ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                jax.random.split(k_s, HP["num_envs"]), st, action, env_params
            )
            done = jnp.logical_or(term, trunc)
            ep_ret = ep_ret + r
            out = Batch(
                obs, action, logp, value, r, done, jnp.where(done, ep_ret, jnp.nan)
            )
            return (params, obs2, st2, jnp.where(done, 0.0, ep_ret), key), out

        def loss_fn(params, b, adv, target):
            logits, value = policy(params, b.obs)
            logp_all = jax.nn.log_softmax(logits)
            logp = jnp.take_along_axis(logp_all, b.action[:, None], 1)[:, 0]
            v_clip = b.value + jnp.clip(value - b.value, -HP["clip"], HP["clip"])
            v_loss = (
                0.5 * jnp.maximum((value - target) ** 2, (v_clip - target) ** 2).mean()
            )
            ratio = jnp.exp(logp - b.logp)
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            pg = -jnp.minimum(
                ratio * adv, jnp.clip(ratio, 1 - HP["clip"], 1 + HP["clip"]) * adv
            ).mean()
            ent = -(jnp.exp(logp_all) * logp_all).sum(-1).mean()
            return pg + HP["vf"] * v_loss - HP["ent"] * ent

        def update(carry, _):
            params, opt, obs, st, ep_ret, key = carry
            (params, obs, st, ep_ret, key), traj = jax.lax.scan(
                env_step, (params, obs, st, ep_ret, key), None, HP["num_steps"]
            )
            _, last_v = policy(params, obs)

            def gae_step(c, t):
                gae, next_v = c
                delta = t.reward + HP["gamma"] * next_v * (1 - t.done) - t.value
                gae = delta + HP["gamma"] * HP["lam"] * (1 - t.done) * gae
                return (gae, t.value), gae

            _, adv = jax.lax.scan(
                gae_step,
                (jnp.zeros_like(last_v), last_v),
                traj,
                reverse=True,
                unroll=16,
            )
            target = adv + traj.value

            def epoch(c, _):
                params, opt, key = c
                key, k = jax.random.split(key)
                perm = jax.random.permutation(k, batch)
                flat = jax.tree.map(
                    lambda x: x.reshape((batch,) + x.shape[2:]), (traj, adv, target)
                )
                mbs = jax.tree.map(
                    lambda x: jnp.take(x, perm, 0).reshape(
                        (HP["minibatches"], -1) + x.shape[1:]
                    ),
                    flat,
                )

                def mb(c, m):
                    params, opt = c
                    g = jax.grad(loss_fn)(params, *m)
                    upd, opt = tx.update(g, opt)
                    return (optax.apply_updates(params, upd), opt), None

                (params, opt), _ = jax.lax.scan(mb, (params, opt), mbs)
                return (params, opt, key), None

            (params, opt, key), _ = jax.lax.scan(
                epoch, (params, opt, key), None, HP["epochs"]
            )
            ret = jnp.nanmean(traj.ep_return)
            return (params, opt, obs, st, ep_ret, key), ret

        _, returns = jax.lax.scan(
            update, (params, opt, obs, st, ep_ret, key), None, n_updates
        )
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
    steps = (
        a.seeds
        * (int(a.timesteps) // (HP["num_steps"] * HP["num_envs"]))
        * HP["num_steps"]
        * HP["num_envs"]
    )
    final = float(np.nanmean(np.asarray(rets)[:, -10:]))
    print(
        json.dumps(
            dict(
                seeds=a.seeds,
                timesteps=steps,
                compile_s=round(t1 - t0, 3),
                run_s=round(t2 - t1, 3),
                sps=round(steps / (t2 - t1)),
                final_return=round(final, 1),
            )
        )
    )


if __name__ == "__main__":
    main()
