"""A run of whole transactions appended in one step equals the same events appended one by one.

``RelayLogWriter.append_transactions`` (``relay/runs.py``) takes, from a batch of received
events, the run of whole MariaDB transactions in their usual shapes, and ``SourceTracker.on_run``
follows it at once; the per-event path (``append``, ``append_rows_run``, ``on_group``) is the
reference. For any stream (row transactions with or without ANNOTATE_ROWS, known and unknown
TABLE_MAPs, some needing a source fact, GTIDs of any flags and domains, doubled GTIDs, DDL and
query transactions, damaged events, a limit on each run) the two must write the same relay
bytes, end at the same positions with the same restart point, and fail on the same event with
the same error. The property tier runs compiled and pure (``BINLAKE_PURE_PYTHON=1``).
"""

from __future__ import annotations

import struct
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from hypothesis import event, given, settings
from hypothesis import strategies as st

from binlake.binlog.constants import HEADER_LEN, ColumnType, EventType
from binlake.binlog.errors import BinlakeError
from binlake.binlog.events import AnnotateRowsEvent, MariaGtidEvent, XidEvent
from binlake.relay.restart import SourceTracker
from binlake.relay.writer import RelayLogWriter
from binlog_builder import LogBuilder
from binlog_fixtures import table_map
from relay_testing import split_events

GTID, TABLE_MAP = int(EventType.MARIADB_GTID), int(EventType.TABLE_MAP)
GTID_FLAGS = st.sampled_from([0] * 12 + [1, 2, 4, 32, 64, 128])
#: Per item: kind (row, ddl, query), GTID flags, domain, doubled GTID, annotate, table, rows.
ITEMS = st.lists(
    st.tuples(
        st.sampled_from(["row"] * 6 + ["ddl", "query"]),
        GTID_FLAGS,
        st.sampled_from([0, 0, 1]),
        st.integers(0, 9),
        st.booleans(),
        st.sampled_from([7, 7, 8]),
        st.integers(1, 3),
    ),
    min_size=1,
    max_size=20,
)


def stream(items: list[tuple[str, int, int, int, bool, int, int]]) -> list[bytes]:
    log = LogBuilder().header()
    log.rotate("mariadb-bin.000001")
    base = table_map((ColumnType.LONG,))
    for kind, flags, domain, doubled, annotate, table_id, rows in items:
        if kind == "ddl":
            log.ddl()
            continue
        if kind == "query":
            log.transaction()
            continue
        log.seq_no += doubled != 0  # 0: the same GTID as the one before
        log.add(MariaGtidEvent(log.seq_no, domain, flags, None, None, b""))
        if annotate:
            log.add(AnnotateRowsEvent(b"INSERT INTO t VALUES (1)"))
        tm = replace(base, table_id=table_id)
        log.add(tm)
        log.write_rows(tm, rows)
        log.add(XidEvent(log.seq_no))
    return split_events(log)


def damaged(events: list[bytes], where: int, how: int) -> list[bytes]:
    """``events`` with one event's declared size wrong, or cut short (``how`` 0: intact)."""
    if how == 0 or not events:
        return events
    at = where % len(events)
    event = events[at]
    if how == 1:
        event = event[:9] + struct.pack("<I", len(event) + 1) + event[13:]
    else:
        event = event[: max(HEADER_LEN - 1, len(event) - 3)]
    return [*events[:at], event, *events[at + 1 :]]


@dataclass
class Outcome:
    relay: bytes
    state: tuple[object, ...]
    error: tuple[int, type[BaseException], str] | None


def drive(
    events: list[bytes], folder: Path, *, runs: bool, limit: int, facts_for: int, max_bytes: int
) -> Outcome:
    """Append ``events`` as the receiver does: transactions in runs (``runs``) or event by
    event; the TABLE_MAPs of table ``facts_for`` need a source fact (never in a run)."""
    writer = RelayLogWriter.open(folder)
    tracker = SourceTracker()
    plain: set[bytes] = set()
    error = None
    at = 0
    try:
        while at < len(events):
            raw = events[at]
            if runs and raw[4] == GTID and (lasts := tracker.maria_lasts) is not None:
                run = writer.append_transactions(
                    events, at, plain_maps=plain, lasts=lasts, limit=limit, max_bytes=max_bytes
                )
                assert run.transactions <= limit
                if run.transactions:
                    event(f"a run of {min(run.transactions, 3)}+ transactions")
                    tracker.on_run(run)
                    assert run.end > at and not writer.in_transaction
                    at = run.end
                    continue
            end = writer.append_rows_run(events, at)
            if end > at:
                at = end
                continue
            writer.append(raw, crc_checked=True)
            if raw[4] == TABLE_MAP and int.from_bytes(raw[19:25], "little") != facts_for:
                plain.add(raw[HEADER_LEN:-4])
            if writer.last_group is not None:
                tracker.on_group(writer.last_group)
            at += 1
    except BinlakeError as exc:
        event(f"{type(exc).__name__} ({'in runs' if runs else 'one by one'})")
        error = (at, type(exc), str(exc))
    state = (
        writer.position,
        writer.boundary,
        writer.in_transaction,
        tracker.point(),
        tracker.stream,
        tracker.gtid_base_known,
    )
    writer.close()
    relay = bytearray()
    for name in writer.files:
        data = bytearray((folder / name).read_bytes())
        fde_end = 4 + int.from_bytes(data[13:17], "little")
        data[4:8] = data[75:79] = bytes(4)  # our FORMAT_DESCRIPTION's time (and its CRC32)
        data[fde_end - 4 : fde_end] = bytes(4)
        relay += data
    return Outcome(bytes(relay), state, error)


@settings(max_examples=200, deadline=None)
@given(
    items=ITEMS,
    limit=st.integers(1, 6),
    max_bytes=st.sampled_from([1, 200, 400, 1 << 20]),
    facts_for=st.sampled_from([0, 8]),
    where=st.integers(0, 200),
    how=st.sampled_from([0, 0, 0, 0, 1, 2]),
)
def test_a_run_of_transactions_appends_what_the_events_one_by_one_append(
    items: list[tuple[str, int, int, int, bool, int, int]],
    limit: int,
    max_bytes: int,
    facts_for: int,
    where: int,
    how: int,
) -> None:
    events = damaged(stream(items), where, how)
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        kwargs = {"limit": limit, "facts_for": facts_for, "max_bytes": max_bytes}
        one_by_one = drive(events, Path(a), runs=False, **kwargs)
        in_runs = drive(events, Path(b), runs=True, **kwargs)
    assert in_runs.error == one_by_one.error
    assert in_runs.state == one_by_one.state
    assert in_runs.relay == one_by_one.relay


def test_runs_take_whole_transactions_of_known_tables_and_stop_at_the_limit() -> None:
    items = [("row", 0, 0, 1, True, 7, 1)] * 5
    events = stream(items)
    with tempfile.TemporaryDirectory() as tmp:
        writer = RelayLogWriter.open(Path(tmp))
        tracker = SourceTracker()
        for raw in events[:4]:  # FORMAT_DESCRIPTION, GTID_LIST, ROTATE, then a transaction
            writer.append(raw, crc_checked=True)
            if writer.last_group is not None:
                tracker.on_group(writer.last_group)
        first = 3
        maps = {events[first + 2][HEADER_LEN:-4]}
        lasts = tracker.maria_lasts
        assert lasts == {}
        run = writer.append_transactions(events, first, plain_maps=maps, lasts=lasts, limit=1)
        assert run.transactions == 0, "a TABLE_MAP never framed before is not taken"
        for raw in events[first : first + 5]:
            writer.append(raw, crc_checked=True)
        tracker.on_group(writer.last_group)  # type: ignore[arg-type]
        lasts = tracker.maria_lasts
        assert lasts is not None
        run = writer.append_transactions(events, first + 5, plain_maps=maps, lasts=lasts, limit=3)
        assert (run.transactions, run.end) == (3, first + 5 + 15)
        tracker.on_run(run)
        assert tracker.transactions == 4
        assert str(tracker.gtid_state) == "0-1-4"
        writer.close()
