"""Whatever the stream, the relay log writer puts every event verbatim where it said it would.

Streams of query transactions, DDL and row transactions (GTID, TABLE_MAP, rows events, XID) are
appended as the receiver appends them (runs of rows events through ``append_rows_run``, the rest
through ``append`` with the CRC32 already checked) or one by one through the checking
``append``, with syncs at any boundaries and any file size (so rotations anywhere a boundary
allows). Every event must read back byte for byte at the position the writer gave it, each file
must end where its last event ends, and every file must scan clean. The property tier runs
compiled and pure (``BINLAKE_PURE_PYTHON=1``): compiled by mypyc 2.4.1, a slice whose bounds
called ``os.write`` wrote each new file's header twice, shifting every event after it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from binlake.binlog.constants import ColumnType
from binlake.binlog.events import MariaGtidEvent, XidEvent
from binlake.position import RelayPosition
from binlake.relay.writer import RelayLogWriter
from binlake.storage.tail_scan import scan_file
from binlog_builder import LogBuilder
from binlog_fixtures import table_map
from relay_testing import split_events

#: A stream's shape: per group, -1 a DDL, 0 a row transaction of one rows event, n > 0 a
#: query transaction of n statements; row transactions take their rows events' count from
#: ROWS below.
SHAPES = st.lists(
    st.tuples(st.integers(min_value=-1, max_value=3), st.integers(min_value=1, max_value=5)),
    min_size=1,
    max_size=8,
)


def stream(shape: list[tuple[int, int]]) -> list[bytes]:
    """The events of a source binlog of ``shape``, as a replication stream delivers them."""
    log = LogBuilder().header()
    tm = table_map((ColumnType.LONG,))
    for kind, rows in shape:
        if kind < 0:
            log.ddl()
        elif kind > 0:
            log.transaction(statements=kind)
        else:
            log.seq_no += 1
            log.add(MariaGtidEvent(log.seq_no, 0, 0, None, None, b""))
            log.add(tm)
            log.write_rows(tm, rows)
            log.add(XidEvent(log.seq_no))
    return split_events(log)


def append_all(
    writer: RelayLogWriter, events: list[bytes], received: bool, syncs: list[bool]
) -> list[tuple[RelayPosition, bytes]]:
    """Append ``events`` (as the receiver does when ``received``), syncing at boundaries as
    ``syncs`` says; returns where the writer said each event went."""
    placed: list[tuple[RelayPosition, bytes]] = []
    at = 0
    while at < len(events):
        start = writer.position
        end = writer.append_rows_run(events, at) if received else at
        if end == at:
            writer.append(events[at], crc_checked=received)
            end = at + 1
        offset = start.offset
        for event in events[at:end]:
            placed.append((RelayPosition(start.file, offset), event))
            offset += len(event)
        assert writer.position == RelayPosition(start.file, offset)
        if not writer.in_transaction and syncs[at % len(syncs)]:
            writer.sync()
        at = end
    return placed


@settings(max_examples=120, deadline=None)
@given(
    shape=SHAPES,
    received=st.booleans(),
    syncs=st.lists(st.booleans(), min_size=1, max_size=5),
    max_file_size=st.integers(min_value=300, max_value=4000),
)
def test_every_event_reads_back_byte_for_byte_where_the_writer_put_it(
    shape: list[tuple[int, int]], received: bool, syncs: list[bool], max_file_size: int
) -> None:
    events = stream(shape)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        writer = RelayLogWriter.open(folder, max_file_size=max_file_size)
        placed = append_all(writer, events, received, syncs)
        writer.close()
        files = {name: (folder / name).read_bytes() for name in writer.files}
        ends: dict[str, int] = {}
        for position, event in placed:
            data = files[position.file]
            assert data[position.offset : position.offset + len(event)] == event
            ends[position.file] = position.offset + len(event)
        for name, end in ends.items():
            assert len(files[name]) == end, f"{name} holds bytes after its last event"
            facts = scan_file(folder / name)
            assert facts.clean and not facts.in_use
