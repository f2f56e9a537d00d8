"""plan_segments: a run cut into segments, with and without periodic
evaluation, fresh and resumed (pure host arithmetic, nothing compiled)."""

import pytest

from ondevice_rl.train.run.plan import Segment, plan_segments


@pytest.mark.parametrize(
    "updates, segments", [(1, 20), (8, 3), (20, 20), (976, 20), (39, 20), (7, 2)]
)
def test_equal_segments_then_one_shorter(updates, segments):
    length = -(-updates // min(segments, updates))  # RunSpec.segment_length
    plan = plan_segments(updates, length)
    lengths = [s.length for s in plan]
    assert sum(lengths) == updates and len(plan) <= segments
    assert all(n == length for n in lengths[:-1]) and lengths[-1] <= length
    assert [s.start for s in plan] == [sum(lengths[:i]) for i in range(len(plan))]
    assert {s.program for s in plan} <= {(length, 0), (lengths[-1], 0)}


def test_hand_worked_plans():
    assert plan_segments(8, 3) == [Segment(0, 3, 0), Segment(3, 3, 0), Segment(6, 2, 0)]
    # Evaluation every 2 updates: length 3 rounds up to 4 (one program).
    assert plan_segments(10, 3, eval_every=2) == [
        Segment(0, 4, 0),
        Segment(4, 4, 0),
        Segment(8, 2, 0),
    ]
    # No evaluation falls within the run: the length stays.
    assert [s.length for s in plan_segments(5, 2, eval_every=8)] == [2, 2, 1]
    # Resumed from update 6: the rest only; nothing left to run.
    assert plan_segments(8, 3, done=6) == [Segment(6, 2, 0)]
    assert plan_segments(8, 3, done=8) == []


def test_resumed_off_the_evaluation_grid_carries_the_phase():
    # A run of 5 updates (evaluated every 4) extended to 12: segments start
    # at 5 and 9, one past the grid; their evaluations land on 8 and 12.
    assert plan_segments(12, 4, eval_every=4, done=5) == [
        Segment(5, 4, 1),
        Segment(9, 3, 1),
    ]
    # A segment with no evaluation in it shares the phase-0 program.
    assert plan_segments(10, 8, eval_every=8, done=1) == [
        Segment(1, 8, 1),
        Segment(9, 1, 0),
    ]


def test_rejects_non_positive_lengths():
    with pytest.raises(ValueError, match="segment_length must be positive"):
        plan_segments(5, 0)
