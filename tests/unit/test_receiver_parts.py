"""The receiver's small parts: the fsync schedule, reconnect backoff, the reader-thread feed,
the behind-by computation and the progress output."""

from __future__ import annotations

import io
import random
import threading
from collections.abc import Iterator

import pytest

from binlake.config import SyncPolicy
from binlake.errors import SourceConnectionLostError
from binlake.position import SourcePosition
from binlake.source.feed import EventFeed
from binlake.source.policy import Backoff, SyncSchedule
from binlake.source.progress import Progress, behind_bytes


def grouped(interval_s: float = 0.05, most: int = 3) -> SyncSchedule:
    return SyncSchedule(SyncPolicy.GROUPED, interval_s, most)


def test_grouped_sync_is_due_after_the_interval_since_the_oldest_transaction() -> None:
    schedule = grouped()
    assert not schedule.due(100.0) and schedule.wait_s(100.0) is None
    schedule.on_transaction(100.0)
    schedule.on_transaction(100.04)
    assert not schedule.due(100.04)
    assert schedule.wait_s(100.04) == pytest.approx(0.01)
    assert schedule.due(100.06)
    schedule.on_synced()
    assert not schedule.due(200.0)


def test_grouped_sync_is_due_after_the_most_transactions_whichever_first() -> None:
    schedule = grouped(interval_s=60.0, most=3)
    for _ in range(2):
        schedule.on_transaction(1.0)
    assert not schedule.due(1.0)
    schedule.on_transaction(1.0)
    assert schedule.due(1.0)


def test_every_transaction_sync_is_due_after_each_transaction() -> None:
    schedule = SyncSchedule(SyncPolicy.EVERY_TRANSACTION, 60.0, 1000)
    assert not schedule.due(0.0)
    schedule.on_transaction(0.0)
    assert schedule.due(0.0)


def test_a_run_of_transactions_has_room_up_to_the_count_that_falls_due() -> None:
    schedule = grouped(interval_s=60.0, most=5)
    assert schedule.room == 5
    schedule.on_transactions(0, 1.0)
    assert schedule.oldest is None and not schedule.due(1.0)
    schedule.on_transactions(3, 1.0)
    assert (schedule.room, schedule.due(1.0), schedule.oldest) == (2, False, 1.0)
    schedule.on_transactions(2, 2.0)
    assert schedule.due(2.0) and schedule.room == 1 and schedule.oldest == 1.0
    schedule.on_synced()
    assert schedule.room == 5
    every = SyncSchedule(SyncPolicy.EVERY_TRANSACTION, 60.0, 1000)
    assert every.room == 1


def test_backoff_doubles_up_to_the_cap_with_jitter_in_the_upper_half() -> None:
    backoff = Backoff(0.5, 4.0, rng=random.Random(7))
    waits = [backoff.next_wait() for _ in range(6)]
    bases = [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    for wait, base in zip(waits, bases, strict=True):
        assert base / 2 <= wait <= base
    backoff.reset()
    assert backoff.next_wait() <= 0.5


def test_backoff_is_exhausted_only_with_a_limit() -> None:
    unbounded = Backoff(0.1, 1.0)
    for _ in range(100):
        unbounded.next_wait()
    assert not unbounded.exhausted
    bounded = Backoff(0.1, 1.0, max_attempts=2)
    bounded.next_wait()
    assert not bounded.exhausted
    bounded.next_wait()
    assert bounded.exhausted


def gated(events: list[bytes], gate: threading.Event) -> Iterator[list[bytes]]:
    yield events[:1]
    yield events[1:2]
    gate.wait(5)
    yield events[2:4]
    yield events[4:]
    raise SourceConnectionLostError("peer went away")


def test_the_feed_hands_over_events_in_order_then_the_error() -> None:
    gate = threading.Event()
    events = [bytes([i]) * (i + 1) for i in range(5)]
    feed = EventFeed(gated(events, gate)).start()
    got: list[bytes] = []
    while len(got) < 2:
        got += feed.take(1.0)
    assert feed.take(0.01) == []  # the reader waits at the gate: nothing, no error yet
    gate.set()
    with pytest.raises(SourceConnectionLostError):
        while True:
            got += feed.take(1.0)
    assert got == events


def test_the_feed_stops_reading_when_the_receiver_falls_behind() -> None:
    produced: list[int] = []

    def endless() -> Iterator[list[bytes]]:
        n = 0
        while True:
            produced.append(n)
            n += 1
            yield [b"x" * 100]

    feed = EventFeed(endless(), max_buffered_bytes=1000).start()
    first = feed.take(1.0)
    threading.Event().wait(0.05)
    assert len(produced) <= len(first) + 12  # bounded by the buffer, not by the source
    feed.stop()


def test_an_ended_dump_is_a_lost_connection() -> None:
    feed = EventFeed(iter([[b"a"]])).start()
    assert feed.take(1.0) == [b"a"]
    with pytest.raises(SourceConnectionLostError, match="ended the dump"):
        feed.take(1.0)


def test_behind_bytes_counts_the_rest_of_the_file_and_every_later_file() -> None:
    files = (("b.000001", 1000), ("b.000002", 500), ("b.000003", 200))
    assert behind_bytes(None, files) == 1700
    assert behind_bytes(SourcePosition("b.000002", 100), files) == 600
    assert behind_bytes(SourcePosition("b.000003", 200), files) == 0
    assert behind_bytes(SourcePosition("b.000004", 4), files) == 0


def test_progress_writes_log_lines_off_a_terminal_and_one_live_line_on_it() -> None:
    plain = io.StringIO()
    progress = Progress(plain, interval_s=5.0, live=False)
    progress.count(10, 2_000_000, 3)
    progress.status(progress._last_at + 2.0, SourcePosition("b.000001", 99), 5_000_000)
    progress.message("stopped")
    lines = plain.getvalue().splitlines()
    assert lines[0].startswith("receive: b.000001:99  5 events/s  1.0 MB/s  behind 5.0 MB")
    assert lines[1] == "receive: stopped"
    live = io.StringIO()
    terminal = Progress(live, live=True)
    terminal.status(terminal._last_at + 1.0, None, 0)
    terminal.message("done")
    assert live.getvalue().startswith("\r\x1b[2K-  ") and "\nreceive: done\n" in live.getvalue()
