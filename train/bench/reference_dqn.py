"""Reference point for DQN speed: a plain fused DQN loop on gymnax CartPole-v1.

The textbook single-jit DQN of PureJaxRL's ``dqn.py``: every hyperparameter a
compile-time constant, a flashbax flat replay buffer in device memory, one
environment vector step per iteration, a learning step under ``lax.cond``
every iteration once the buffer holds ``learning_starts`` transitions, a hard
target copy under ``lax.cond``. Written with jax, flax, optax, gymnax and
flashbax only (none of this project's code); our benches run it beside
``ondevice-rl``'s DQN in one invocation (``bench train --reference``,
``bench launches``).

Settings: 10 envs; buffer 10,000; batch 128; learning from 10,000 steps on,
one gradient step per vector step (= per 10 env steps); target copied every
500 env steps; epsilon 1.0 -> 0.05 linearly over 250,000 env steps; Adam
2.5e-4; gamma 0.99; Q-network 120-84 ReLU; squared TD error; done =
terminated or truncated (as the scripts it stands for).

    python -m ondevice_rl.train.bench.reference_dqn --seeds 1 --timesteps 500000

Prints one JSON line: seeds, timesteps, compile_s, run_s, sps, final_return
(mean return of episodes finished in the last 2% of iterations).
"""

import argparse
import json
import time

import flax.linen as nn
import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import optax

HP = dict(
    num_envs=10,
    buffer=10_000,
    batch=128,
    learning_starts=10_000,
    target_every=500,
    eps_start=1.0,
    eps_end=0.05,
    eps_steps=250_000,
    lr=2.5e-4,
    gamma=0.99,
)


class QNet(nn.Module):
    actions: int

    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Dense(120)(x))
        x = nn.relu(nn.Dense(84)(x))
        return nn.Dense(self.actions)(x)


#: ``bench launches``: the share of iterations taking the true branch of each
#: ``lax.cond`` in ``step`` once learning has started (learn; the target copy
#: every 500 env steps).
CONDITIONALS_P_TRUE = {"step": [1.0, HP["num_envs"] / HP["target_every"]]}


def num_updates(timesteps) -> int:
    """Updates (vector steps) of ``make_train(timesteps)``."""
    return int(timesteps) // HP["num_envs"]


def make_train(timesteps):
    import flashbax as fbx  # lazy: the `bench` extra, needed only to build the program

    env, params = gymnax.make("CartPole-v1")
    n = HP["num_envs"]
    iters = timesteps // n
    net = QNet(env.action_space(params).n)
    tx = optax.adam(HP["lr"])
    buf = fbx.make_flat_buffer(
        max_length=HP["buffer"],
        min_length=HP["batch"],
        sample_batch_size=HP["batch"],
        add_sequences=False,
        add_batch_size=n,
    )

    def train(key):
        key, k_net, k_env = jax.random.split(key, 3)
        obs, env_state = jax.vmap(env.reset, (0, None))(
            jax.random.split(k_env, n), params
        )
        p = net.init(k_net, obs[0])
        opt = tx.init(p)
        example = dict(
            obs=obs[0],
            action=jnp.int32(0),
            reward=jnp.float32(0),
            done=jnp.bool_(False),
        )
        buf_state = buf.init(example)

        def step(carry, _):
            p, target, opt, buf_state, env_state, obs, ep_ret, t, key = carry
            key, k_eps, k_act, k_step, k_sample = jax.random.split(key, 5)
            eps = jnp.clip(
                HP["eps_start"]
                + (HP["eps_end"] - HP["eps_start"]) * t / HP["eps_steps"],
                HP["eps_end"],
                HP["eps_start"],
            )
            greedy = jnp.argmax(net.apply(p, obs), -1)
            rand = jax.random.randint(k_act, (n,), 0, env.action_space(params).n)
            action = jnp.where(jax.random.uniform(k_eps, (n,)) < eps, rand, greedy)
            nobs, env_state, reward, term, trunc, _ = jax.vmap(
                env.step, (0, 0, 0, None)
            )(jax.random.split(k_step, n), env_state, action, params)
            done = jnp.logical_or(term, trunc)
            buf_state = buf.add(
                buf_state, dict(obs=obs, action=action, reward=reward, done=done)
            )
            t = t + n
            ep_ret = ep_ret + reward
            finished = jnp.where(done, ep_ret, jnp.nan)
            ep_ret = jnp.where(done, 0.0, ep_ret)

            def learn(p, opt):
                b = buf.sample(buf_state, k_sample).experience
                q_next = jnp.max(net.apply(target, b.second["obs"]), -1)
                y = b.first["reward"] + (1.0 - b.first["done"]) * HP["gamma"] * q_next

                def loss(p):
                    q = net.apply(p, b.first["obs"])
                    q = jnp.take_along_axis(q, b.first["action"][:, None], -1)[:, 0]
                    return jnp.mean((q - y) ** 2)

                g = jax.grad(loss)(p)
                u, opt = tx.update(g, opt, p)
                return optax.apply_updates(p, u), opt

            ready = buf.can_sample(buf_state) & (t > HP["learning_starts"])
            p, opt = jax.lax.cond(ready, learn, lambda p, o: (p, o), p, opt)
            target = jax.lax.cond(
                t % HP["target_every"] == 0, lambda: p, lambda: target
            )
            carry = (p, target, opt, buf_state, env_state, nobs, ep_ret, t, key)
            return carry, finished

        carry = (p, p, opt, buf_state, env_state, obs, jnp.zeros(n), jnp.int32(0), key)
        _, finished = jax.lax.scan(step, carry, None, length=iters)
        return finished  # [iters, n], NaN where no episode ended

    return train


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--timesteps", type=float, default=5e5)
    a = ap.parse_args()
    train = make_train(int(a.timesteps))
    steps = num_updates(a.timesteps) * HP["num_envs"]
    keys = jax.random.split(jax.random.PRNGKey(0), a.seeds)
    f = jax.jit(jax.vmap(train))
    t0 = time.perf_counter()
    compiled = f.lower(keys).compile()
    t1 = time.perf_counter()
    finished = np.asarray(jax.block_until_ready(compiled(keys)))  # [S, iters, n]
    t2 = time.perf_counter()
    tail = finished[:, -max(1, finished.shape[1] // 50) :]
    print(
        json.dumps(
            dict(
                seeds=a.seeds,
                timesteps=steps,
                compile_s=round(t1 - t0, 3),
                run_s=round(t2 - t1, 3),
                sps=round(steps * a.seeds / (t2 - t1)),
                final_return=float(np.nanmean(tail)),
            )
        )
    )


if __name__ == "__main__":
    main()
