"""ondevice_rl.files.partial_saves: a failed save's partial tree removed for
good, late writes included, and left alone on a read-only file system."""

import os

from ondevice_rl.files import partial_saves


def test_a_failed_save_made_again_after_it_was_removed_is_removed(
    tmp_path, monkeypatch
):
    # A write of the failed save still in flight lands after the tree is gone
    # and makes it again; the next look finds it and removes it too.
    tree = tmp_path / "4.orbax-checkpoint-tmp"
    (tree / "item").mkdir(parents=True)
    waits = []

    def late_write(seconds):
        waits.append(seconds)
        if len(waits) == 1:
            assert not tree.exists()
            (tree / "late").mkdir(parents=True)

    monkeypatch.setattr(partial_saves.time, "sleep", late_write)
    partial_saves.remove_until_quiet(lambda: [p for p in [tree] if p.exists()])
    assert not tree.exists() and len(waits) == 2


def test_a_tree_that_cannot_be_removed_is_left_at_once_on_a_read_only_disk(
    tmp_path, monkeypatch
):
    tree = tmp_path / "4.orbax-checkpoint-tmp"
    tree.mkdir()
    monkeypatch.setattr(partial_saves.shutil, "rmtree", lambda *a, **k: None)
    waits = []
    monkeypatch.setattr(partial_saves.time, "sleep", waits.append)
    read_only = os.statvfs_result((0,) * 8 + (os.ST_RDONLY, 255))
    monkeypatch.setattr(partial_saves.os, "statvfs", lambda path: read_only)
    partial_saves.remove_until_quiet(lambda: [tree])
    assert tree.exists() and waits == []
