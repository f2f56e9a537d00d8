"""A population's rounds: what each round did to every member, and each
group's handed-back member.

The lineage holds one ``RoundRecord`` per round (``population.py``) as host
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

from ondevice_rl.train.sweep.population import EVENTS

#: ``lineage.npz`` and ``lineage.csv`` fields besides ``hp/<name>``.
RECORD_FIELDS = ("score", "finite", "parent", "event", "trial", "rung")
TIMINGS = ("round_seconds", "step_seconds")


@dataclasses.dataclass
class Lineage:
    """The rounds of a population of ``members`` (padding dropped).

    Attributes:
        strategy: what acts between rounds (``PBT``, ``Halving``), or None.
        lengths: updates per round.
        group: ``[P]`` each member's group (search seed position).
        score_episodes: N of the score.
        records: per round done, ``name -> [P]`` (``RECORD_FIELDS``, hp).
        round_seconds, step_seconds: per round, the wall time of the round's
            training and of the strategy's step (each up to its results on
            the host).
        hp: ``name -> [P]`` the final hyperparameters.
        resumed_from: the round a resumed population started after.
        notes: lines about skipped checkpoints.
    """

    strategy: Any
    lengths: list[int]
    group: np.ndarray
    score_episodes: int
    steps_per_update: int
    records: list[dict] = dataclasses.field(default_factory=list)
    round_seconds: list[float] = dataclasses.field(default_factory=list)
    step_seconds: list[float] = dataclasses.field(default_factory=list)
    hp: dict | None = None
    resumed_from: int = 0
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def name(self) -> str:
        """The strategy's name; ``random`` (random search) without one."""
        return "random" if self.strategy is None else self.strategy.name

    @property
    def members(self) -> int:
        return len(self.group)

    @property
    def done(self) -> int:
        """Rounds done."""
        return len(self.records)

    @property
    def updates_done(self) -> int:
        return sum(self.lengths[: self.done])

    def add_round(self, record: Any, round_s: float, step_s: float) -> None:
        """Keeps a round's host ``RoundRecord`` and timings."""
        fields = {name: getattr(record, name) for name in RECORD_FIELDS}
        fields.update({f"hp/{k}": v for k, v in record.hp._asdict().items()})
        self.records.append({k: np.asarray(v) for k, v in fields.items()})
        self.round_seconds.append(round_s)
        self.step_seconds.append(step_s)

    def arrays(self) -> dict[str, np.ndarray]:
        """The records as ``name -> [rounds, P_padded]`` and the timings."""
        if not self.records:
            return {}
        out = {k: np.stack([r[k] for r in self.records]) for k in self.records[0]}
        out["round_seconds"] = np.asarray(self.round_seconds)
        out["step_seconds"] = np.asarray(self.step_seconds)
        return out

    def restore(self, arrays: dict[str, np.ndarray], done: int) -> None:
        """The records of the first ``done`` rounds, as ``arrays`` wrote them."""
        names = [k for k in arrays if k not in TIMINGS]
        self.records = [{k: arrays[k][r] for k in names} for r in range(done)]
        self.round_seconds = list(arrays.get("round_seconds", [0.0] * done))[:done]
        self.step_seconds = list(arrays.get("step_seconds", [0.0] * done))[:done]
        self.resumed_from = done

    def __getitem__(self, name: str) -> np.ndarray:
        """``[rounds, P]`` of one record field (``score``, ``hp/gamma``, ...)."""
        return np.stack([r[name][: self.members] for r in self.records])

    def events(self) -> np.ndarray:
        """``[rounds, P]`` event names (``kept``, ``exploited``, ``refilled``)."""
        if not self.records:
            return np.zeros((0, self.members), object)
        return np.asarray(EVENTS, object)[self["event"]]

    @property
    def env_steps(self) -> int:
        """Env steps of the rounds done, over every member (refills in)."""
        return int(self.updates_done * self.steps_per_update * self.members)

    def round_env_steps(self) -> np.ndarray:
        """``[rounds]`` a member's env steps at the end of each round done."""
        return np.cumsum(self.lengths[: self.done]) * self.steps_per_update

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
        for g in range(int(self.group.max(initial=-1)) + 1):
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

    @property
    def steps_share(self) -> float:
        """Share of the rounds' time spent in the strategy's steps."""
        total = sum(self.round_seconds) + sum(self.step_seconds)
        return sum(self.step_seconds) / total if total else 0.0
