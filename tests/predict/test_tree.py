"""mdtest's phases over a tree (iobench/predict/tree.py): the shape and its limits, one and
several streams on a real folder, every item counted, timed and removed."""

from __future__ import annotations

from pathlib import Path

import pytest

from iobench.errors import UsageError
from iobench.predict.tree import PHASES, TreeShape, tree_probe


def test_a_shape_is_depth_branch_and_files_a_folder() -> None:
    shape = TreeShape.parse("2,3,10")
    assert shape == TreeShape(2, 3, 10)
    folders = shape.folders()
    assert len(folders) == 1 + 3 + 9 and folders[:2] == ["", "d0"] and folders[-1] == "d2/d2"
    assert TreeShape.parse("0,0,5").folders() == [""]  # mdtest's flat folder, as fio's
    assert shape.describe() == "2 deep, 3 wide, 10 files a folder (13 folders, 130 files a stream)"
    for bad, says in (("2,3", "DEPTH,BRANCH,FILES"), ("a,b,c", "DEPTH,BRANCH,FILES"),
                      ("1,0,5", "BRANCH at least 1"), ("0,0,0", "FILES at least 1"),
                      ("-1,2,2", "0 or more"), ("4,40,1", "at most 100,000")):  # fmt: skip
        with pytest.raises(UsageError, match=says):
            TreeShape.parse(bad)


@pytest.mark.parametrize("streams", [1, 3])
def test_every_phase_does_every_item_of_every_stream(tmp_path: Path, streams: int) -> None:
    shape = TreeShape(1, 2, 7)  # 3 folders, 21 files a stream
    got = tree_probe(str(tmp_path), shape, streams, seconds=None, file_bytes=100)
    assert list(got.phases) == list(PHASES) and got.streams == streams
    want = {"dir_create": 3, "dir_remove": 3}
    for name, phase in got.phases.items():
        each = want.get(name, 21)
        assert phase.items == each * streams and phase.latency.count == phase.items, name
        assert [n for n, _ in phase.streams] == [each] * streams, name
        assert phase.seconds == max(s for _, s in phase.streams) > 0 and phase.per_s > 0
    assert list(tmp_path.iterdir()) == []  # every folder removed again
    doc = got.to_dict()
    assert (doc["depth"], doc["branch"], doc["files_per_dir"], doc["file_bytes"]) == (1, 2, 7, 100)
    block = doc["phases"]["file_create"]
    assert block["total_ios"] == 21 * streams and len(block["streams"]) == streams
    assert set(block) == {"total_ios", "runtime", "iops", "clat_ns", "streams"}
    assert block["clat_ns"]["N"] == 21 * streams


def test_a_phase_stops_starting_items_at_its_deadline_and_later_ones_follow(
    tmp_path: Path,
) -> None:
    got = tree_probe(str(tmp_path), TreeShape(0, 0, 200_000), 1, seconds=0.05)
    made = got.phases["file_create"].items
    assert 0 < made < 200_000
    # stat, read and remove work on what was made (each within its own 0.05 s)
    assert all(got.phases[p].items <= made for p in ("file_stat", "file_read", "file_remove"))


def test_a_stream_that_fails_ends_the_probe_in_one_error(tmp_path: Path) -> None:
    (tmp_path / "s1").write_text("in the way")  # stream 1 cannot make its root folder
    with pytest.raises(OSError, match="a tree stream failed"):
        tree_probe(str(tmp_path), TreeShape(0, 0, 3), 2, timeout_s=30)
