"""Achievement rates of a trained Craftax-Classic policy beside random play.

    python docs/examples/craftax_achievements.py RUN_DIR [--episodes 128]

Plays ``--episodes`` whole episodes with ``ondevice_rl.evaluation.evaluate``
(vmapped, one compiled program) with the run's policy (actions sampled, as
in training) and with uniformly random actions, from the same keys, and
prints for each: the mean return and length, and per achievement the share
of episodes that unlocked it (Craftax's ``state.achievements`` at the
episode's end). ``--json FILE`` also writes them.
"""

import argparse
import json

import jax
import numpy as np

from ondevice_rl import load_policy, make
from ondevice_rl.evaluation import evaluate


def summary(result: dict, names: list[str]) -> dict:
    """Means of ``evaluate``'s returns and lengths, and the share of
    episodes whose last state holds each achievement."""
    achieved = result["state"].craftax_state.achievements  # [E, 22]
    rates = np.asarray(achieved).mean(axis=0)
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

    def random(weights, carry, obs, key, deterministic):
        return jax.random.randint(key, (args.episodes,), 0, num_actions), carry

    key = jax.random.key(args.seed)
    out = {}
    for label, act in (("trained", trainer.policy), ("random", random)):
        run = jax.jit(
            lambda key, act=act: evaluate(
                act, weights, env, params, key, args.episodes, False, carry,
                keep_state=True,
            )
        )  # fmt: skip
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
