"""For any prefix of a valid log, recovery keeps exactly the longest prefix ending at a boundary.

Logs are built with LogBuilder (transactions of 1-4 statements and standalone DDL), cut at any
offset, optionally followed by garbage, and written as the newest file of a folder with IN_USE
set. Recovery must leave ``raw[:b]`` where ``b`` is the end of the last complete group at or
before the cut, or remove the file when not even the format description is whole; and running it
again must change nothing.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from binlake.binlog.stream import EventStream
from binlake.binlog.transactions import TransactionGrouper, iter_groups
from binlake.storage.recovery import recover_log
from binlog_builder import LogBuilder
from relay_testing import check_recovered_log, folder_hashes, set_in_use

NAME = "mariadb-bin.000001"
SHAPES = st.lists(st.integers(min_value=0, max_value=4), min_size=1, max_size=6)


def build_log(shape: list[int]) -> bytes:
    log = LogBuilder().header()
    for statements in shape:
        if statements == 0:
            log.ddl()
        else:
            log.transaction(statements=statements)
    return log.bytes()


def group_ends(raw: bytes) -> list[int]:
    return [g.end_offset for g in iter_groups(EventStream(raw), TransactionGrouper())]


def recover_prefix(content: bytes) -> bytes | None:
    """Recover a one-file folder holding ``content``; the file's bytes after, None if removed."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = folder / NAME
        path.write_bytes(content)
        if len(content) > 21:
            set_in_use(path)
        (folder / "mariadb-bin.index").write_text(f"{NAME}\n")
        recover_log(folder)
        check_recovered_log(folder, "mariadb-bin")
        after = folder_hashes(folder)
        recover_log(folder)
        assert folder_hashes(folder) == after, "a second recovery changed something"
        return path.read_bytes() if path.exists() else None


@settings(max_examples=150, deadline=None)
@given(shape=SHAPES, data=st.data())
def test_recovery_of_any_prefix_keeps_the_longest_prefix_ending_at_a_boundary(
    shape: list[int], data: st.DataObject
) -> None:
    raw = build_log(shape)
    cut = data.draw(st.integers(min_value=0, max_value=len(raw)))
    garbage = data.draw(st.sampled_from([b"", b"\x33" * 23, b"\x00" * 7, b"\xff" * 40]))
    ends = [end for end in group_ends(raw) if end <= cut]
    result = recover_prefix(raw[:cut] + (garbage if cut >= 4 else b""))
    if not ends:
        assert result is None, "a file without a whole format description must be removed"
    else:
        assert result == raw[: ends[-1]]
