"""What a sweep returns: every member's curves and final parameters, the
ranking of settings and, for a population trained in rounds, its lineage.

Scores of one member, from its ``episode_return`` curve ``r[0..U-1]`` (mean
return of the episodes finished during each update's rollout):

* ``final_return``: ``ondevice_rl.metrics.final_return`` (the mean of the
  last 10 updates, as every run reports it);
* ``last10pct_return``: mean of the last 10% of updates (``ceil(U / 10)``);
* ``auc``: mean of ``r`` over all updates, i.e. the area under the return
  curve with training progress scaled to ``[0, 1]`` (comparable across
  ``total_timesteps``).

A member whose parameters or curves went non-finite is flagged
(``SweepResult.nonfinite``) and left out of the ranking. Settings (members
that differ only by seed) are ranked by the mean of ``last10pct_return``
over their seeds.
"""

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from ondevice_rl.metrics import final_return
from ondevice_rl.train.sweep.lineage import Lineage
from ondevice_rl.train.sweep.plan import Member, SweepPlan
from ondevice_rl.train.sweep.space import shortest

#: A member's scores (``scores``), in ``sweep.csv``'s column order.
SCORE_COLUMNS = ("final_return", "last10pct_return", "auc")
#: ``sweep.csv`` columns that are not a member's setting values (a
#: population in rounds adds its group, trial, rung, score and whether it
#: is handed back).
RESULT_COLUMNS = ("member", "setting", "seed", "num_updates", *SCORE_COLUMNS)
RESULT_COLUMNS += ("nonfinite", "group", "trial", "rung", "score", "handed_back")


def scores(returns: np.ndarray) -> dict[str, float]:
    """``final_return``, ``last10pct_return``, ``auc`` of a ``[U]`` return curve."""
    returns = np.asarray(returns, np.float64)
    tail = max(1, math.ceil(len(returns) / 10))
    return {
        "final_return": final_return(returns),
        "last10pct_return": float(returns[-tail:].mean()),
        "auc": float(returns.mean()),
    }


def first_nonfinite(metrics: dict[str, np.ndarray], params_finite: bool) -> str | None:
    """Where a member's training went non-finite, in a few words, or None:
    the first update with a non-finite metric, else its final parameters."""
    bad = {k: np.flatnonzero(~np.isfinite(v)) for k, v in metrics.items()}
    bad = {k: int(v[0]) for k, v in bad.items() if len(v)}
    if bad:
        name = min(bad, key=lambda k: (bad[k], k))
        return f"non-finite {name} at update {bad[name] + 1}"
    return None if params_finite else "non-finite parameters"


class GroupInfo(NamedTuple):
    """One static config of the sweep and how it was run."""

    index: int
    config: Any  # the algorithm's config (hyperparameters at their defaults)
    members: int
    chunk_size: int
    num_chunks: int
    compiled: bool  # a new program was compiled for it in this run
    estimated_bytes_per_member: int
    program_bytes: int  # XLA memory analysis of one chunk, per device


class SettingSummary(NamedTuple):
    """A setting's scores over its finished seeds (mean and std)."""

    setting: int
    values: dict  # swept field -> value
    seeds: tuple[int, ...]
    last10pct_mean: float
    last10pct_std: float
    final_mean: float
    auc_mean: float
    diverged: int = 0  # seeds left out because they went non-finite


@dataclass
class SweepResult:
    """Outcome of ``run_sweep``; unfinished members (Ctrl-C) have no metrics.

    Attributes:
        plan: the members and what was swept.
        metrics: per member, ``{name: [updates trained] array}`` or None.
        params: per member, its final ``PolicyParams`` (host arrays: what
            acting needs) or None; ``load_policy(out, member=i)`` reads the
            ones a sweep directory keeps.
        params_finite: per member, whether its final parameters were all
            finite, or None.
        groups: one entry per static config.
        lineage: the rounds of a population trained in rounds (a strategy
            acting between them, or checkpoints), else None.
        programs_compiled: programs compiled by this run (0 when all were
            cached from an earlier run in the process).
        interrupted: the run was stopped (Ctrl-C, SIGTERM) before every member
            finished.
        stop_signal: the signal that stopped it (None: Ctrl-C from code, or
            not stopped).
        seconds: wall time of the run.
    """

    plan: SweepPlan
    metrics: list[dict[str, np.ndarray] | None]
    groups: list[GroupInfo] = field(default_factory=list)
    programs_compiled: int = 0
    interrupted: bool = False
    stop_signal: int | None = None
    seconds: float = 0.0
    params: list[Any] = field(default_factory=list)
    params_finite: list[bool | None] = field(default_factory=list)
    lineage: Lineage | None = None

    def __post_init__(self):
        size = len(self.plan.members)
        self.params = self.params or [None] * size
        self.params_finite = self.params_finite or [None] * size

    @property
    def config(self) -> Any:
        """The first member's config (a population in rounds: every
        member's static config, the base with its fixed changes)."""
        return self.plan.members[0].config

    @property
    def searched(self) -> tuple[str, ...]:
        """The swept fields that are hyperparameters."""
        fields = self.config.HYPERPARAMS._fields
        return tuple(k for k in self.plan.swept if k in fields)

    @property
    def finished(self) -> list[Member]:
        return [m for m in self.plan.members if self.metrics[m.index] is not None]

    def returns(self, member: Member) -> np.ndarray:
        """``[updates]`` episode-return curve of a finished member."""
        return self.metrics[member.index]["episode_return"]

    @property
    def nonfinite(self) -> dict[int, str]:
        """Finished members whose training went non-finite: index -> where."""
        found = {}
        for m in self.finished:
            ok = self.params_finite[m.index] is not False
            why = first_nonfinite(self.metrics[m.index], ok)
            if why is not None:
                found[m.index] = why
        return found

    def rows(self) -> list[dict[str, Any]]:
        """One row per finished member: ids, hyperparameters (a population
        in rounds: its group, trial, rung and final ones), env param
        overrides and swept values, scores (in rounds: its search ``score``
        and whether it is handed back) and ``nonfinite`` (where it went
        non-finite, empty if it did not)."""
        rows, nonfinite, lineage = [], self.nonfinite, self.lineage
        picks = set(lineage.handed_back().values()) if lineage else set()
        final = lineage.final_scores() if lineage else None
        last = lineage.records[-1] if lineage and lineage.records else None
        for m in self.finished:
            i = m.index
            row = {"member": i, "setting": m.setting, "seed": m.seed}
            if lineage is None:
                fields = m.config.HYPERPARAMS._fields
                row.update({name: getattr(m.config, name) for name in fields})
                row.update({f"env.{k}": v for k, v in m.env_params})
                row.update(self.plan.setting_values(m))
            else:
                row["group"] = int(lineage.group[i])
                if last is not None:
                    row["trial"] = int(last["trial"][i])
                    row["rung"] = int(last["rung"][i])
                row.update({k: shortest(v[i]) for k, v in lineage.hp.items()})
            row["num_updates"] = len(self.returns(m))
            row.update(scores(self.returns(m)))
            if lineage is not None:
                row["score"] = float(final[i])
                row["handed_back"] = i in picks
            row["nonfinite"] = nonfinite.get(i, "")
            rows.append(row)
        return rows

    def ranking(self) -> list[SettingSummary]:
        """Settings with at least one finished seed that stayed finite, best
        first; a setting with a diverged seed ranks below those without."""
        by_setting: dict[int, list[Member]] = {}
        diverged: dict[int, int] = {}
        nonfinite = self.nonfinite
        for m in self.finished:
            if m.index in nonfinite:
                diverged[m.setting] = diverged.get(m.setting, 0) + 1
            else:
                by_setting.setdefault(m.setting, []).append(m)
        summaries = []
        for setting, members in by_setting.items():
            s = [scores(self.returns(m)) for m in members]
            last10pct = np.array([x["last10pct_return"] for x in s])
            summaries.append(
                SettingSummary(
                    setting,
                    self.plan.setting_values(members[0]),
                    tuple(m.seed for m in members),
                    float(last10pct.mean()),
                    float(last10pct.std()),
                    float(np.mean([x["final_return"] for x in s])),
                    float(np.mean([x["auc"] for x in s])),
                    diverged.get(setting, 0),
                )
            )
        return sorted(
            summaries, key=lambda x: (x.diverged > 0, -x.last10pct_mean, x.setting)
        )

    @property
    def best(self) -> SettingSummary | None:
        """The setting ranked first (highest mean ``last10pct_return`` over
        seeds, none of which diverged)."""
        ranking = self.ranking()
        return ranking[0] if ranking else None

    @property
    def best_member(self) -> int | None:
        """In rounds: the handed-back member with the best score; else the
        finite finished member with the highest ``last10pct_return``."""
        if self.lineage is not None:
            return self.lineage.best_member
        nonfinite = self.nonfinite
        candidates = [m for m in self.finished if m.index not in nonfinite]
        if not candidates:
            return None
        key = lambda m: (-scores(self.returns(m))["last10pct_return"], m.index)  # noqa: E731
        return min(candidates, key=key).index

    def curves(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Per setting: ``(env_steps [U], returns [seeds, U])``."""
        out: dict[int, list] = {}
        for m in self.finished:
            out.setdefault(m.setting, [m.config.steps_per_update, []])[1].append(
                self.returns(m)
            )
        return {
            s: (np.arange(1, len(r[0]) + 1) * bs, np.stack(r))
            for s, (bs, r) in out.items()
        }


def formatted(value: Any) -> Any:
    """A value as the tables write it: floats with 6 significant digits,
    ``hidden`` as ``64x64``."""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, tuple):
        return "x".join(str(v) for v in value)
    return value


def format_values(values: dict) -> str:
    """``"learning_rate=0.0003 env.length=0.5"``."""
    return " ".join(f"{k}={formatted(v)}" for k, v in values.items())
