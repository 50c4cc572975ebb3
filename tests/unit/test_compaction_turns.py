"""``CompactionTurns``: a table's compaction and its batches' commits take turns."""

from __future__ import annotations

import threading

import pytest

from binlake.lake.tables.turns import CompactionTurns

pytestmark = pytest.mark.unit

#: Long enough for a thread that should block to have blocked, short enough for a unit test.
SETTLE_S = 0.2


def started(work: object) -> threading.Thread:
    thread = threading.Thread(target=work, daemon=True)  # type: ignore[arg-type]
    thread.start()
    return thread


def commit_started(turns: CompactionTurns, table: str) -> threading.Event:
    """Set once a commit to ``table``, on a thread of its own, has started."""
    entered = threading.Event()

    def commit() -> None:
        with turns.committing(table):
            entered.set()

    started(commit)
    return entered


def test_commits_to_one_table_run_side_by_side() -> None:
    turns = CompactionTurns()
    with turns.committing("t"):
        assert commit_started(turns, "t").wait(1.0), "a second commit waited for the first"


def test_a_compaction_waits_for_the_commit_in_flight_then_holds_new_commits_until_it_ends() -> None:
    turns = CompactionTurns()
    order: list[str] = []
    in_flight, compacting, compaction_may_end = (threading.Event() for _ in range(3))
    first_commit_may_end = threading.Event()

    def commit_in_flight() -> None:
        with turns.committing("t"):
            in_flight.set()
            first_commit_may_end.wait(5.0)
            order.append("first commit ended")

    def compaction() -> None:
        with turns.compacting("t"):
            order.append("compaction started")
            compacting.set()
            compaction_may_end.wait(5.0)
            order.append("compaction ended")

    def next_commit() -> None:
        with turns.committing("t"):
            order.append("next commit started")

    started(commit_in_flight)
    assert in_flight.wait(1.0)
    compactor = started(compaction)
    assert not compacting.wait(SETTLE_S), "the compaction started beside a commit in flight"
    follower = started(next_commit)  # the compaction is waiting: this commit waits behind it
    first_commit_may_end.set()
    assert compacting.wait(1.0)
    follower.join(SETTLE_S)
    assert follower.is_alive(), "a commit started while the table was compacted"
    compaction_may_end.set()
    compactor.join(1.0)
    follower.join(1.0)
    assert order == [
        "first commit ended",
        "compaction started",
        "compaction ended",
        "next commit started",
    ]


def test_a_compaction_holds_only_its_own_tables_commits() -> None:
    turns = CompactionTurns()
    with turns.compacting("t"):
        assert commit_started(turns, "u").wait(1.0), "another table's commit waited for it"
