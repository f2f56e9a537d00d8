"""A run cut into segments: which updates each compiled segment runs.

A run's ``U = config.num_updates`` updates run as segments of ``L`` updates
(``RunSpec.segment_length``), then at most one shorter remainder, so at most
two segment programs are compiled. With periodic evaluation every ``N``
updates, ``L`` is rounded up to a multiple of ``N``: evaluations then land at
the same place in every segment (one program). A segment that starts off that
grid (after a resume that extended a run) carries its ``phase``, the start
modulo ``N``, which its program needs to place the evaluations.
"""

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


def plan_segments(
    num_updates: int,
    segment_length: int,
    eval_every: int | None = None,
    done: int = 0,
) -> list[Segment]:
    """The segments from update ``done`` to ``num_updates``: ``segment_length``
    updates each (a multiple of ``eval_every`` when evaluations fall within
    the run), then any remainder."""
    if segment_length < 1:
        raise ValueError(f"segment_length must be positive, got {segment_length}")
    length = segment_length
    if eval_every is not None and eval_every <= num_updates:
        length = eval_every * -(-length // eval_every)  # round up
    plan = []
    for start in range(done, num_updates, length):
        n = min(length, num_updates - start)
        phase = 0
        if eval_every is not None and eval_updates(n, start % eval_every, eval_every):
            phase = start % eval_every  # 0 too on the grid
        plan.append(Segment(start, n, phase))
    return plan
