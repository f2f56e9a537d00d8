"""The progress bar without a terminal (train/services/progress.py): plain
lines a log file keeps, for counted work too (sweeps' members, searches'
rounds)."""

import re

from ondevice_rl.train.services.progress import ProgressBar


def test_counted_work_prints_one_line_per_advance_without_a_terminal(capsys):
    with ProgressBar(5, "random search", "rounds", lines=True) as bar:
        bar.skip(2)  # a resume found two rounds done: shown, not timed
        bar.describe("round 3/5")
        bar.advance(1)
        bar.advance(1)
        bar.log("a note")
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert [x.split(",")[0] for x in lines[:2]] == [
        "random search: 3/5 rounds",
        "random search: 4/5 rounds",
    ]
    assert all(
        re.search(r"\d:\d\d:\d\d so far, ETA (\d:\d\d:\d\d|-)$", x) for x in lines[:2]
    )
    assert lines[2] == "a note"


def test_disabled_prints_nothing(capsys):
    with ProgressBar(3, "sweep", "members", enabled=False) as bar:
        bar.skip(1)
        bar.advance(2)
    assert capsys.readouterr().err == ""
