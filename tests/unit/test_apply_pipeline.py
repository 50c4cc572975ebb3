"""The applier's pipelining: reading the relay log ahead on a thread (``apply.prefetch``) and a
batch's table commits queued on a worker (``apply.commit_queue``) keep order and errors."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import closing

import pytest

from binlake.apply.commit_queue import CommitQueue, commit_worker
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


def test_queued_commits_run_one_at_a_time_in_order() -> None:
    order: list[str] = []
    with CommitQueue[str](commit_worker()) as commits:
        for name in ("a", "b", "c"):
            commits.submit(lambda name=name: order.append(name) or name)  # type: ignore[misc]
    assert commits.done == ["a", "b", "c"] == order
    assert commits.count == 3


def test_a_failed_commit_stops_the_queue_before_the_next_one() -> None:
    ran: list[str] = []

    def fail() -> str:
        raise RuntimeError("conflict")

    with pytest.raises(RuntimeError, match="conflict"), CommitQueue[str](commit_worker()) as q:
        q.submit(fail)
        q.submit(lambda: ran.append("b") or "b")  # type: ignore[func-returns-value]
    assert ran == []
