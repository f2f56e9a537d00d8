"""Search strategies compared fairly: random search, PBT and successive
halving on one task and budget, over several search seeds
(``ondevice-rl sweep compare``).

* Every method searches the same space (default the learner's
  ``DEFAULT_SPACES`` entry: the hyperparameters that matter most, within
  their declared ranges) with the same ``members`` N per search seed, in
  the same rounds; random search and PBT train every member for the
  config's ``total_timesteps``; successive halving gets ``halving_budget``
  of that (0.5: half the env steps, refills counted, since its slots never
  idle): as ``members`` slots of that fraction of the env steps each
  (``halving_spend="length"``), or as that fraction of the slots, each
  trained as long as random search's members (``"slots"``: a trial that
  survives every rung gets the full budget).
* Search seed ``s`` draws the initial members with ``sample_seed=s`` and
  trains member ``i`` from ``fold_in(key(s), i)``: the methods start alike,
  seed by seed (paired).
* Each method hands back its best member by training score
  (``Lineage.handed_back``); that member's deterministic policy is then
  evaluated on ``eval_episodes`` episodes from fresh keys, the same for
  every method (``member_eval.py``).
* Reported per method: the evaluation returns per seed, their IQM and 95%
  CI, the env steps spent, the share of time spent between rounds (the
  exploit/explore overhead) and, for each method against random search, the
  mean paired difference over seeds with its bootstrap 95% CI.
"""

import time
from typing import Any, NamedTuple

import numpy as np

from ondevice_rl.train.sweep import stats
from ondevice_rl.train.sweep.engine import check_plan, default_round_updates, run_plan
from ondevice_rl.train.sweep.halving import Halving
from ondevice_rl.train.sweep.member_eval import evaluate_members
from ondevice_rl.train.sweep.pbt import PBT
from ondevice_rl.train.sweep.plan import SweepPlan, build_plan
from ondevice_rl.train.sweep.space import LogUniform, SweepSpecError, Uniform

#: Per learner, the search space compared when none is given.
DEFAULT_SPACES = {
    "ppo": {
        "learning_rate": LogUniform(1e-4, 3e-3),
        "ent_coef": LogUniform(1e-4, 1e-1),
        "clip_eps": Uniform(0.1, 0.3),
    },
    "a2c": {
        "learning_rate": LogUniform(1e-4, 3e-3),
        "ent_coef": LogUniform(1e-4, 1e-1),
    },
    "dqn": {"learning_rate": LogUniform(1e-5, 1e-3), "tau": LogUniform(1e-3, 1.0)},
    "pqn": {"learning_rate": LogUniform(1e-5, 1e-3), "q_lambda": Uniform(0.5, 0.95)},
    "sac": {"learning_rate": LogUniform(1e-4, 3e-3), "tau": LogUniform(1e-3, 0.1)},
    "td3": {"learning_rate": LogUniform(1e-4, 3e-3), "tau": LogUniform(1e-3, 0.1)},
}
METHODS = ("random", "pbt", "halving")


class Comparison(NamedTuple):
    """What is compared and how (see the module docstring)."""

    members: int = 16  # N per search seed
    seeds: tuple[int, ...] = tuple(range(5))  # search seeds
    methods: tuple[str, ...] = METHODS
    halving_budget: float = 0.5
    halving_spend: str = "length"  # or "slots"
    eta: int = 2
    min_rounds: int = 1
    brackets: int = 1
    round_updates: int | None = None
    score_episodes: int = 20
    eval_episodes: int = 32
    progress: bool = False


def seeded_plan(config: Any, search: dict, members: int, seeds) -> SweepPlan:
    """Search seed ``s``: ``members`` draws with ``sample_seed=s``; one
    group per seed, one plan."""
    all_members, swept = [], ()
    for s in seeds:
        plan = build_plan(config, [s], search, samples=members, sample_seed=s)
        swept, space = plan.swept, plan.search
        for m in plan.members:
            index = len(all_members)
            all_members.append(m._replace(index=index, setting=index))
    return SweepPlan(config, tuple(all_members), swept, tuple(seeds), {}, space)


def method_setup(name: str, config: Any, search: dict, how: Comparison) -> tuple:
    """``(config, slots, strategy, plan)`` of one method (a one-line
    ``SweepSpecError`` for an unknown method or bad halving settings)."""
    if name not in METHODS:
        raise SweepSpecError(f"unknown method {name!r}; choose from {list(METHODS)}")
    members, budget = how.members, how.halving_budget if name == "halving" else 1.0
    if budget != 1.0 and how.halving_spend == "slots":
        members = max(2, round(members * budget))  # each the full length
    elif budget != 1.0:
        config = config.replace(total_timesteps=int(config.total_timesteps * budget))
    strategy = {
        "random": None,
        "pbt": PBT(),
        "halving": Halving(how.eta, how.min_rounds, how.brackets),
    }[name]
    return config, members, strategy, seeded_plan(config, search, members, how.seeds)


def _options(config: Any, how: Comparison) -> dict:
    """``run_plan``'s options of a method: the same rounds for every one."""
    updates = how.round_updates or default_round_updates(config.num_updates)
    return dict(round_updates=updates, score_episodes=how.score_episodes)


def run_method(name: str, setup: tuple, how: Comparison) -> dict:
    """One method's search (its ``method_setup``) over every search seed,
    and its evaluation."""
    config, members, strategy, plan = setup
    start = time.perf_counter()
    result = run_plan(
        plan,
        strategy=strategy,
        solo_keys=False,
        progress=how.progress,
        **_options(config, how),
    )
    lineage = result.lineage
    picks = [lineage.handed_back()[g] for g in range(len(how.seeds))]
    returns = evaluate_members(
        result.config, result.params, picks, how.eval_episodes, how.seeds
    )
    iqm, low, high = stats.interval_estimates({name: returns})[name]
    final = lineage.final_scores()
    return {
        "method": name,
        "env_steps": lineage.env_steps,
        "total_timesteps_per_member": config.total_timesteps,
        "slots": members,
        "eval_returns": returns.tolist(),
        "iqm": iqm,
        "ci": [low, high],
        "training_scores": [None if p is None else float(final[p]) for p in picks],
        "handed_back_hp": [
            None if p is None else {k: float(v[p]) for k, v in lineage.hp.items()}
            for p in picks
        ],
        "step_share": lineage.steps_share,
        "rounds_s": float(sum(lineage.round_seconds)),
        "steps_s": float(sum(lineage.step_seconds)),
        "seconds": time.perf_counter() - start,
        "programs_compiled": result.programs_compiled,
    }


def with_differences(rows: list[dict]) -> list[dict]:
    """``rows`` (one per method) with each method's paired difference to
    random search's evaluation returns, ``minus_random``: mean, 95% CI."""
    base = next((r for r in rows if r["method"] == "random"), None)
    for r in rows:
        if base is not None and r is not base:
            mean, low, high = stats.paired_difference(
                np.asarray(r["eval_returns"]), np.asarray(base["eval_returns"])
            )
            r["minus_random"] = {"mean": mean, "ci": [low, high]}
    return rows


def compare(config: Any, search: dict, how: Comparison) -> list[dict]:
    """Every method's row, with its difference to random search; every
    method's search is checked before any trains."""
    setups = {name: method_setup(name, config, search, how) for name in how.methods}
    for method_config, _, strategy, plan in setups.values():
        check_plan(plan, strategy, **_options(method_config, how))
    rows = [run_method(name, setup, how) for name, setup in setups.items()]
    return with_differences(rows)


def table(record: dict) -> str:
    """The comparison as a Markdown table."""
    lines = [
        "| method | env steps | eval return IQM [95% CI] | minus random [95% CI] "
        "| between rounds |",
        "|---|---|---|---|---|",
    ]
    for r in record["methods"]:
        diff = r.get("minus_random")
        shown = (
            ""
            if diff is None
            else (f"{diff['mean']:+.1f} [{diff['ci'][0]:+.1f}, {diff['ci'][1]:+.1f}]")
        )
        lines.append(
            f"| {r['method']} | {r['env_steps']:,} | {r['iqm']:.1f} "
            f"[{r['ci'][0]:.1f}, {r['ci'][1]:.1f}] | {shown} | "
            f"{100 * r['step_share']:.2f}% |"
        )
    return "\n".join(lines) + "\n"
