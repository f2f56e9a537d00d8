"""Achievement rates of a trained Craftax-Classic policy beside random play.

    python docs/examples/craftax_achievements.py RUN_DIR [--episodes 128]

Plays ``--episodes`` whole episodes (one per env, vmapped in one compiled
``while_loop`` until every one has ended) with the run's policy (actions
sampled, as in training) and with uniformly random actions, from the same
keys, and prints for each: the mean return and length, and per achievement
the share of episodes that unlocked it (Craftax's ``state.achievements``
at the episode's end). ``--json FILE`` also writes them.
"""

import argparse
import json

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl import load_policy, make


def play(env, params, act, episodes: int, key: jax.Array) -> dict:
    """``act(obs [E, ...], key) -> [E]`` actions in ``episodes`` envs until
    each episode ends: returns ``[E]``, lengths ``[E]``, achievements
    ``[E, 22]``."""
    reset_key, key = jax.random.split(key)
    keys = jax.random.split(reset_key, episodes)
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
    zeros = jnp.zeros(episodes)
    start = (obs, state, zeros, zeros.astype(jnp.int32), zeros.astype(bool), key)

    def body(carry):
        obs, state, total, length, done, key = carry
        key, act_key, step_key = jax.random.split(key, 3)
        action = act(obs, act_key)
        ts = step(jax.random.split(step_key, episodes), state, action, params)
        live = ~done

        def keep(new, old):
            return jnp.where(live.reshape(live.shape + (1,) * (new.ndim - 1)), new, old)

        obs, state = jax.tree.map(keep, (ts.obs, ts.state), (obs, state))
        total = total + jnp.where(live, ts.reward, 0.0)
        done = done | ts.terminated | ts.truncated
        return obs, state, total, length + live, done, key

    obs, state, total, length, done, _ = jax.lax.while_loop(
        lambda carry: ~carry[4].all(), body, start
    )
    achieved = state.craftax_state.achievements
    return {"return": total, "length": length, "achievements": achieved}


def summary(result: dict, names: list[str]) -> dict:
    rates = np.asarray(result["achievements"]).mean(axis=0)
    return {
        "mean_return": float(np.mean(result["return"])),
        "mean_length": float(np.mean(result["length"])),
        "achievement_rates": {
            n: round(float(r), 3) for n, r in zip(names, rates, strict=True)
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--episodes", type=int, default=128)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()

    policy = load_policy(args.run_dir)
    env, params = make(policy.env)
    from craftax.craftax_classic.constants import Achievement

    names = [a.name.lower() for a in Achievement]
    trainer, weights = policy.run.trainer, policy.params
    carry = trainer.initial_carry((args.episodes,))
    num_actions = int(env.action_space(params).n)

    def trained(obs, key):
        return trainer.policy(weights, carry, obs, key, False, None)[0]

    def random(obs, key):
        return jax.random.randint(key, (args.episodes,), 0, num_actions)

    key = jax.random.key(args.seed)
    out = {}
    for label, act in (("trained", trained), ("random", random)):
        run = jax.jit(lambda key, act=act: play(env, params, act, args.episodes, key))
        out[label] = summary(jax.device_get(run(key)), names)
    print(f"{'':24} {'trained':>8} {'random':>8}")
    for field in ("mean_return", "mean_length"):
        print(f"{field:24} {out['trained'][field]:8.2f} {out['random'][field]:8.2f}")
    for name in names:
        rates = [out[label]["achievement_rates"][name] for label in out]
        print(f"{name:24} {rates[0]:8.3f} {rates[1]:8.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"run": args.run_dir, "episodes": args.episodes, **out}, f, indent=1
            )


if __name__ == "__main__":
    main()
