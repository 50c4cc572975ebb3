"""The applier's pipelining: reading the relay log ahead on a thread (``apply.prefetch``) and a
batch's table commits on a pool of workers (``apply.commit_pool``) keep order and errors."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import closing

import pytest

from binlake.apply.commit_pool import CommitPool
from binlake.apply.prefetch import ahead


def test_read_ahead_yields_every_item_in_order_within_its_bound() -> None:
    items = list(ahead(iter(range(1000)), lambda _: 10, max_bytes=50, max_items=3))
    assert items == list(range(1000))


def test_read_ahead_raises_the_producers_error_after_the_items_before_it() -> None:
    def produce() -> Iterator[int]:
        yield 1
        yield 2
        raise ValueError("bad byte")

    got: list[int] = []
    with pytest.raises(ValueError, match="bad byte"):
        for item in ahead(produce(), lambda _: 1):
            got.append(item)
    assert got == [1, 2]


def test_leaving_read_ahead_early_stops_and_closes_the_producer() -> None:
    closed = threading.Event()

    def produce() -> Iterator[int]:
        try:
            n = 0
            while True:
                yield n
                n += 1
        finally:
            closed.set()

    with closing(ahead(produce(), lambda _: 1, max_items=4)) as items:
        assert next(items) == 0
    assert closed.is_set()
    assert not [t for t in threading.enumerate() if t.name == "binlake-read-ahead"]


def test_one_worker_runs_a_batchs_commits_one_at_a_time_in_order() -> None:
    order: list[str] = []
    pool = CommitPool(1)
    with pool.batch() as commits:
        for name in ("a", "b", "c"):
            commits.submit(name, lambda name=name: order.append(name) or name)  # type: ignore[misc]
    pool.close()
    assert commits.done == ["a", "b", "c"] == order
    assert commits.count == 3


def test_several_workers_commit_different_tables_at_once() -> None:
    """Four commits that each wait for the others to start can only end if they run at once."""
    all_started = threading.Barrier(4, timeout=10)
    pool = CommitPool(4)
    with pool.batch() as commits:
        for name in "abcd":
            commits.submit(name, lambda name=name: (all_started.wait(), name)[1])  # type: ignore[misc]
    pool.close()
    assert sorted(commits.done) == ["a", "b", "c", "d"]


def test_waiting_for_a_table_waits_for_its_commit_only() -> None:
    """``wait(table)`` (before a schema change) returns once that table's commit is done, while
    another table's commit is still running."""
    release = threading.Event()
    pool = CommitPool(2)
    with pool.batch() as commits:
        commits.submit("slow", lambda: release.wait(10) and "slow")  # type: ignore[func-returns-value]
        commits.submit("fast", lambda: "fast")
        commits.wait("fast")
        assert commits.done == ["fast"]
        release.set()
    pool.close()
    assert commits.done == ["fast", "slow"]


def test_a_failed_commit_stops_the_batch_before_its_next_commits_start() -> None:
    ran: list[str] = []
    failed = threading.Event()

    def fail() -> str:
        failed.set()
        raise RuntimeError("conflict")

    pool = CommitPool(1)
    with pytest.raises(RuntimeError, match="conflict"), pool.batch() as commits:
        commits.submit("a", fail)
        failed.wait(10)
        commits.submit("b", lambda: ran.append("b") or "b")  # type: ignore[func-returns-value]
    pool.close()
    assert ran == []


def test_a_batch_ends_only_after_every_commit_in_flight_ended() -> None:
    """An error on the applier's thread while commits run: they end before it propagates (the
    retry must not read the tables while one is in flight)."""
    ended: list[str] = []
    pool = CommitPool(2)
    with pytest.raises(ValueError, match="planning failed"), pool.batch() as commits:
        commits.submit("a", lambda: (threading.Event().wait(0.2), ended.append("a"))[1])  # type: ignore[func-returns-value]
        raise ValueError("planning failed")
    assert ended == ["a"]
    pool.close()
