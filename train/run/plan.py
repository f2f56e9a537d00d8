"""A run cut into segments: which updates each compiled segment runs.

A run's ``U = config.num_updates`` updates run as segments of ``L`` updates
(``RunSpec.segment_length``), then at most one shorter remainder, so at most
two segment programs are compiled. ``L`` is rounded up to a multiple of the
log interval (rows of ``log_every`` updates then end on the same updates in
every segment; only the run's last row may be shorter) and, with periodic
evaluation every ``N`` updates, of ``N``: evaluations then land at the same
place in every segment (one program). A segment that starts off that grid
(after a resume that extended a run) carries its ``phase``, the start modulo
``N``, which its program needs to place the evaluations.

``shorter_length``: when a segment runs longer than wanted (progress is only
seen at segment ends), the rest of the run can be re-planned with segments of
``L / 2^k`` updates, the longest that fits, so a run compiles at most one
more segment length (and its remainder).
"""

import math
from typing import NamedTuple


class Segment(NamedTuple):
    start: int  # updates completed before it
    length: int  # updates it runs (static: the program's scan length)
    phase: int  # start % N when an evaluation falls in it off the grid, else 0

    @property
    def program(self) -> tuple[int, int]:
        """``(length, phase)``: segments alike in both share one program."""
        return self.length, self.phase


def eval_updates(length: int, phase: int, every: int) -> list[int]:
    """0-based indices, within a segment of ``length`` updates starting at an
    update count ``≡ phase (mod every)``, of the updates followed by an
    evaluation."""
    first = every - phase  # updates until the count is a multiple of `every`
    return list(range(first - 1, length, every))


def grain(num_updates: int, eval_every: int | None, log_every: int = 1) -> int:
    """What every full segment's length is a multiple of: ``log_every``, and
    ``eval_every`` when evaluations fall within the run."""
    if eval_every is not None and eval_every <= num_updates:
        return math.lcm(log_every, eval_every)
    return log_every


def plan_segments(
    num_updates: int,
    segment_length: int,
    eval_every: int | None = None,
    done: int = 0,
    log_every: int = 1,
) -> list[Segment]:
    """The segments from update ``done`` to ``num_updates``: ``segment_length``
    updates each (rounded up to a multiple of ``grain``), then any
    remainder."""
    if segment_length < 1:
        raise ValueError(f"segment_length must be positive, got {segment_length}")
    step = grain(num_updates, eval_every, log_every)
    length = step * -(-segment_length // step)  # round up
    plan = []
    for start in range(done, num_updates, length):
        n = min(length, num_updates - start)
        phase = 0
        if eval_every is not None and eval_updates(n, start % eval_every, eval_every):
            phase = start % eval_every  # 0 too on the grid
        plan.append(Segment(start, n, phase))
    return plan


def shorter_length(length: int, seconds: float, target: float, step: int) -> int:
    """The segment length to use after a segment of ``length`` updates took
    ``seconds``: ``length`` if within ``target``, else the longest
    ``length / 2^k`` (rounded down to a multiple of ``step``, at least
    ``step``) expected to take at most ``target``."""
    if seconds <= target or length <= step:
        return length
    shorter = length
    while shorter > step and seconds * shorter / length > target:
        shorter = max(step, (shorter // 2) // step * step)
    return shorter
