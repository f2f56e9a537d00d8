"""What a search returns: its lineage round by round, and each group's
handed-back member.

The lineage holds one ``RoundRecord`` per round (``strategies.py``) as host
arrays ``[rounds, P]``: each member's score (mean return of its last N
finished episodes) and finiteness after the round, the member it copied from
(PBT) and what happened to it (``kept``, ``exploited``, ``refilled``), its
trial, rung and hyperparameters after the strategy's step. A group's
handed-back member is its best at the end: for successive halving the best
score among the trials on the highest rung reached, otherwise the best
final score; a non-finite member is never handed back.
"""

import dataclasses
from typing import Any

import numpy as np

from ondevice_rl.train.sweep.results import first_nonfinite, scores
from ondevice_rl.train.sweep.rounds import EVENTS
from ondevice_rl.train.sweep.space import SweepPlan

#: ``lineage.npz`` and ``lineage.csv`` fields besides ``hp/<name>``.
RECORD_FIELDS = ("score", "finite", "parent", "event", "trial", "rung")


@dataclasses.dataclass
class SearchResult:
    """Outcome of ``run_search`` (members are the plan's; padding dropped).

    Attributes:
        plan: the initial members (settings x seeds) and what was searched.
        strategy: the strategy object (``PBT``, ``Halving``, ...).
        lengths: updates per round.
        group: ``[P]`` each member's group (search seed position).
        score_episodes: N of the score.
        records: per round done, ``name -> [P]`` (``RECORD_FIELDS``, hp).
        round_seconds, step_seconds: per round, the wall time of the round's
            training and of the strategy's step (each up to its results on
            the host).
        curves: ``name -> [P, U]`` per-update metrics of each member's slot.
        params: per member, its final ``PolicyParams`` (host arrays).
        hp: ``name -> [P]`` final hyperparameters.
        interrupted: as for sweeps, and so are ``stop_signal``,
            ``resumed_from``, ``programs_compiled`` and ``seconds``.
        notes: lines about skipped checkpoints.
    """

    plan: SweepPlan
    strategy: Any
    lengths: list[int]
    group: np.ndarray
    score_episodes: int
    records: list[dict] = dataclasses.field(default_factory=list)
    round_seconds: list[float] = dataclasses.field(default_factory=list)
    step_seconds: list[float] = dataclasses.field(default_factory=list)
    curves: dict | None = None
    params: list | None = None
    hp: dict | None = None
    interrupted: bool = False
    stop_signal: int | None = None
    resumed_from: int = 0
    programs_compiled: int = 0
    seconds: float = 0.0
    notes: list[str] = dataclasses.field(default_factory=list)
    #: The population on the device while the search runs (None after).
    population: Any = None

    @property
    def members(self) -> int:
        return len(self.plan.members)

    @property
    def config(self) -> Any:
        """The members' static config (the plan's base with its fixed
        changes), hyperparameters as the first member's."""
        return self.plan.members[0].config

    @property
    def done(self) -> int:
        """Rounds done."""
        return len(self.records)

    @property
    def hp_fields(self) -> tuple[str, ...]:
        return self.config.HYPERPARAMS._fields

    @property
    def searched(self) -> tuple[str, ...]:
        return tuple(k for k in self.plan.swept if k in self.hp_fields)

    def add_round(self, record: Any, round_s: float, step_s: float) -> None:
        """Keeps a round's host ``RoundRecord`` and timings."""
        fields = {name: getattr(record, name) for name in RECORD_FIELDS}
        fields.update({f"hp/{k}": v for k, v in record.hp._asdict().items()})
        self.records.append({k: np.asarray(v) for k, v in fields.items()})
        self.round_seconds.append(round_s)
        self.step_seconds.append(step_s)

    def lineage_arrays(self) -> dict[str, np.ndarray]:
        """The records as ``name -> [rounds, P_padded]`` and the timings."""
        if not self.records:
            return {}
        out = {k: np.stack([r[k] for r in self.records]) for k in self.records[0]}
        out["round_seconds"] = np.asarray(self.round_seconds)
        out["step_seconds"] = np.asarray(self.step_seconds)
        return out

    def restore_lineage(self, arrays: dict[str, np.ndarray], done: int) -> None:
        """The records of the first ``done`` rounds, as ``lineage_arrays``
        wrote them."""
        names = [k for k in arrays if k not in ("round_seconds", "step_seconds")]
        self.records = [{k: arrays[k][r] for k in names} for r in range(done)]
        self.round_seconds = list(arrays.get("round_seconds", [0.0] * done))[:done]
        self.step_seconds = list(arrays.get("step_seconds", [0.0] * done))[:done]

    def finish(self, curves: dict, params: Any, hp: Any) -> None:
        """The final population's host arrays (padding dropped)."""
        p = self.members
        self.curves = {k: np.asarray(v)[:p] for k, v in curves.items()}
        self.params = [_row(params, i) for i in range(p)]
        self.hp = {k: np.asarray(v)[:p] for k, v in hp._asdict().items()}

    def lineage(self, name: str) -> np.ndarray:
        """``[rounds, P]`` of one record field (``score``, ``hp/gamma``, ...)."""
        return np.stack([r[name][: self.members] for r in self.records])

    @property
    def env_steps(self) -> int:
        """Env steps of the rounds done, over every member (refills in)."""
        per = self.config.steps_per_update
        return int(sum(self.lengths[: self.done]) * per * self.members)

    def round_env_steps(self) -> np.ndarray:
        """``[rounds]`` a member's env steps at the end of each round done."""
        per = self.config.steps_per_update
        return np.cumsum(self.lengths[: self.done]) * per

    def final_scores(self) -> np.ndarray:
        """``[P]`` each member's score after the last round done (NaN where
        it was not finite)."""
        if not self.records:
            return np.full(self.members, np.nan)
        last = self.records[-1]
        s = last["score"][: self.members].astype(np.float64)
        return np.where(last["finite"][: self.members], s, np.nan)

    def handed_back(self) -> dict[int, int | None]:
        """Per group: the member it hands back (None if none is finite)."""
        out = {}
        s = self.final_scores()
        rung = self.records[-1]["rung"][: self.members] if self.records else None
        for g in range(len(self.plan.seeds)):
            members = [i for i in range(self.members) if self.group[i] == g]
            good = [i for i in members if np.isfinite(s[i])]
            if not good:
                out[g] = None
                continue
            top = max(rung[i] for i in good) if rung is not None else 0
            good = [i for i in good if rung is None or rung[i] == top]
            out[g] = max(good, key=lambda i: (s[i], -i))
        return out

    @property
    def best_member(self) -> int | None:
        """The handed-back member with the best score over all groups."""
        s = self.final_scores()
        picks = [i for i in self.handed_back().values() if i is not None]
        return max(picks, key=lambda i: (s[i], -i)) if picks else None

    def nonfinite(self) -> list[tuple[int, int, int]]:
        """``(round, member, trial)`` of every round a member ended
        non-finite (1-based rounds)."""
        found = []
        for r, record in enumerate(self.records):
            for i in np.flatnonzero(~record["finite"][: self.members]):
                found.append((r + 1, int(i), int(record["trial"][i])))
        return found

    def rows(self) -> list[dict[str, Any]]:
        """One row per member (slot): ids, final hyperparameters, scores of
        its slot's curve, its search score, whether it is handed back."""
        final, picks = self.final_scores(), set(self.handed_back().values())
        last = self.records[-1] if self.records else None
        rows = []
        for m in self.plan.members:
            i = m.index
            row = {"member": i, "setting": m.setting, "seed": m.seed}
            row["group"] = int(self.group[i])
            if last is not None:
                row["trial"], row["rung"] = int(last["trial"][i]), int(last["rung"][i])
            row.update({k: shortest(v[i]) for k, v in (self.hp or {}).items()})
            curve = {k: v[i] for k, v in (self.curves or {}).items()}
            done = sum(self.lengths[: self.done])
            row["num_updates"] = done
            if curve:
                row.update(scores(curve["episode_return"][:done]))
            row["score"] = float(final[i])
            row["handed_back"] = i in picks
            trained = {k: v[:done] for k, v in curve.items()}
            row["nonfinite"] = first_nonfinite(trained, True) or ""
            rows.append(row)
        return rows

    def events(self) -> np.ndarray:
        """``[rounds, P]`` event names (``kept``, ``exploited``, ``refilled``)."""
        if not self.records:
            return np.zeros((0, self.members), object)
        return np.asarray(EVENTS, object)[self.lineage("event")]

    @property
    def steps_share(self) -> float:
        """Share of the rounds' time spent in the strategy's steps."""
        total = sum(self.round_seconds) + sum(self.step_seconds)
        return sum(self.step_seconds) / total if total else 0.0


def shortest(value: Any) -> float:
    """A float32 value as the float with the fewest digits that rounds to it
    (``0.99``, not ``0.9900000095367432``)."""
    return float(str(np.float32(value)))


def _row(tree: Any, i: int) -> Any:
    import jax

    return jax.tree.map(lambda x: np.asarray(x)[i], tree)
