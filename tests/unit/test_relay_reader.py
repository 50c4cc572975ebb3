"""The applier's relay-log reader: whole groups up to a durable boundary, across files, in
chunks, with source positions; damage before the boundary is a typed corruption error."""

from __future__ import annotations

from pathlib import Path

import pytest

from binlake.binlog.constants import ColumnType as T
from binlake.binlog.constants import EventFlag
from binlake.binlog.events import MariaGtidEvent, RotateEvent, XidEvent
from binlake.binlog.rows import RowsEvent, make_rows_event
from binlake.binlog.transactions import GroupKind
from binlake.errors import LogCorruptionError
from binlake.position import RelayPosition
from binlake.relay.reader import RelayGroup, RelayReader, group_events
from binlake.relay.writer import RelayLogWriter
from binlog_builder import LogBuilder
from binlog_fixtures import UTF8MB4, table_map
from relay_testing import split_events


def source_events(transactions: int) -> tuple[list[bytes], list[int]]:
    """A dump: artificial ROTATE, FORMAT_DESCRIPTION, GTID_LIST, then transactions. Also the
    source offsets after each transaction."""
    log = LogBuilder()
    log.add(RotateEvent(4, "mariadb-bin.000001"), flags=EventFlag.ARTIFICIAL)
    log.header()
    ends = [log.transaction(statements=2)[1] for _ in range(transactions)]
    return split_events(log), ends


TM = table_map((T.LONG, T.VARCHAR), (0, 200), charsets=(None, UTF8MB4))


def rows_events(events_per_transaction: list[int], rows_per_event: int = 20) -> list[bytes]:
    """A dump of transactions of a TABLE_MAP and the given number of write-rows events each."""
    log = LogBuilder()
    log.add(RotateEvent(4, "mariadb-bin.000001"), flags=EventFlag.ARTIFICIAL)
    log.header()
    key = 0
    for count in events_per_transaction:
        log.seq_no += 1
        log.add(MariaGtidEvent(log.seq_no, 0, 0, None, None, b""))
        log.add(TM)
        for _ in range(count):
            rows = [(None, (key + i, "x" * (key % 150))) for i in range(rows_per_event)]
            key += rows_per_event
            log.add(make_rows_event("write", TM, rows))
        log.add(XidEvent(log.seq_no))
    return split_events(log)


ROWS_NAMES = {"Write_rows_v1", "Update_rows_v1", "Delete_rows_v1", "Write_rows", "Update_rows",
              "Delete_rows"}  # fmt: skip


def rows_of(group: RelayGroup) -> list[tuple[int, RowsEvent]]:
    return [(e.offset, e.payload) for e in group.group.events if isinstance(e.payload, RowsEvent)]


def write(folder: Path, events: list[bytes], max_file_size: int = 1 << 20) -> RelayLogWriter:
    writer = RelayLogWriter.open(folder, max_file_size=max_file_size)
    for event in events:
        writer.append(event)
        if writer.last_group is not None:
            writer.sync()  # rotates by size at boundaries
    return writer


def test_groups_come_whole_with_source_positions_up_to_the_limit(tmp_path: Path) -> None:
    events, ends = source_events(5)
    writer = write(tmp_path, events)
    limit = writer.position
    reader = RelayReader(tmp_path, writer.files[0])
    groups = list(reader.read(limit))
    transactions = [g for g in groups if g.group.kind is GroupKind.TRANSACTION]
    assert [g.position.offset for g in transactions if g.position] == ends
    assert all(g.position and g.position.file == "mariadb-bin.000001" for g in transactions)
    assert transactions[-1].gtid_state == "0-1-5"
    assert reader.position == limit
    assert list(reader.read(limit)) == []  # nothing new: nothing again
    writer.close()


def test_reading_resumes_where_it_stopped_as_the_log_grows(tmp_path: Path) -> None:
    events, ends = source_events(6)
    writer = write(tmp_path, events[:7])  # header events and the first transaction
    first = list(RelayReader(tmp_path, writer.files[0]).read(writer.position))
    reader = RelayReader(tmp_path, writer.files[0])
    assert len(list(reader.read(writer.position))) == len(first)
    for event in events[7:]:
        writer.append(event)
    writer.sync()
    later = [g for g in reader.read(writer.position) if g.group.is_transaction]
    assert [g.position.offset for g in later if g.position] == ends[1:]
    writer.close()


def test_the_reader_follows_the_index_across_rotated_files(tmp_path: Path) -> None:
    events, ends = source_events(30)
    writer = write(tmp_path, events, max_file_size=1500)
    assert len(writer.files) > 2
    reader = RelayReader(tmp_path, writer.files[0])
    groups = [g for g in reader.read(writer.position) if g.group.is_transaction]
    assert [g.position.offset for g in groups if g.position] == ends
    assert {g.relay_file for g in groups} == set(
        writer.files[: len({g.relay_file for g in groups})]
    )
    writer.close()


def test_a_chunk_smaller_than_a_group_still_yields_it_whole(tmp_path: Path) -> None:
    events, ends = source_events(4)
    writer = write(tmp_path, events)
    reader = RelayReader(tmp_path, writer.files[0], chunk=64)
    groups = [g for g in reader.read(writer.position) if g.group.is_transaction]
    assert [g.position.offset for g in groups if g.position] == ends
    writer.close()


def test_a_limit_inside_a_transaction_is_corruption(tmp_path: Path) -> None:
    events, _ = source_events(2)
    writer = write(tmp_path, events)
    cut = RelayPosition(writer.position.file, writer.position.offset - 10)
    with pytest.raises(LogCorruptionError, match="damaged before a durable boundary") as caught:
        list(RelayReader(tmp_path, writer.files[0]).read(cut))
    assert caught.value.file == writer.files[0]
    writer.close()


def test_a_damaged_byte_before_the_limit_is_corruption_naming_file_and_offset(
    tmp_path: Path,
) -> None:
    events, _ = source_events(3)
    writer = write(tmp_path, events)
    writer.close()
    path = tmp_path / writer.files[0]
    data = bytearray(path.read_bytes())
    data[-30] ^= 0xFF
    path.write_bytes(bytes(data))
    limit = RelayPosition(writer.files[0], len(data))
    with pytest.raises(LogCorruptionError) as caught:
        list(RelayReader(tmp_path, writer.files[0]).read(limit))
    assert caught.value.file == writer.files[0] and caught.value.offset is not None
    assert "binlake binlog recover" in caught.value.hint


def test_a_damaged_event_in_a_later_chunk_is_reported_at_its_offset_in_the_file(
    tmp_path: Path,
) -> None:
    writer = write(tmp_path, rows_events([30]), max_file_size=1 << 30)
    writer.close()
    limit = writer.position
    (whole,) = [g for g in RelayReader(tmp_path, writer.files[0]).read(limit) if rows_of(g)]
    offset, _ = rows_of(whole)[-1]
    assert offset > 4096  # past the first chunk of the reader below
    path = tmp_path / writer.files[0]
    data = bytearray(path.read_bytes())
    data[offset + 9] ^= 0x40  # its size field: an impossible event, found where it starts
    path.write_bytes(bytes(data))
    with pytest.raises(LogCorruptionError) as caught:
        list(RelayReader(tmp_path, writer.files[0], chunk=4096).read(limit))
    assert (caught.value.file, caught.value.offset) == (writer.files[0], offset)


def test_a_relay_file_shorter_than_its_durable_end_is_corruption(tmp_path: Path) -> None:
    events, _ = source_events(3)
    writer = write(tmp_path, events)
    writer.close()
    path = tmp_path / writer.files[0]
    size = path.stat().st_size
    limit = RelayPosition(writer.files[0], size + 100)
    with pytest.raises(LogCorruptionError, match="shorter"):
        list(RelayReader(tmp_path, writer.files[0]).read(limit))


def test_a_group_past_hold_bytes_keeps_no_rows_event_and_they_read_back_whole(
    tmp_path: Path,
) -> None:
    writer = write(tmp_path, rows_events([2, 40, 1]), max_file_size=1 << 30)
    limit = writer.position
    held = [g for g in RelayReader(tmp_path, writer.files[0]).read(limit) if rows_of(g)]
    reader = RelayReader(tmp_path, writer.files[0], chunk=4096, hold_bytes=20_000)
    small, big, last = [g for g in reader.read(limit) if g.group.is_transaction][-3:]
    assert small.aside_context is None and last.aside_context is None
    assert all(event.rows for _, event in rows_of(small) + rows_of(last))
    assert big.aside_context is not None
    assert sum(len(e.rows) for _, e in rows_of(held[1])) > 20_000  # the whole group's images
    assert rows_of(big) == []  # none kept, the first ones dropped too
    kept = [e.type_name for e in big.group.events]
    assert kept == [e.type_name for e in held[1].group.events if e.type_name not in ROWS_NAMES]
    again = [(e.offset, e.payload) for e in group_events(tmp_path, big, chunk=4096)]
    assert [(o, p) for o, p in again if isinstance(p, RowsEvent)] == rows_of(held[1])
    assert [o for o, _ in again] == [e.offset for e in held[1].group.events]
    assert (big.relay_end, big.position, big.size) == (held[1].relay_end, held[1].position,
                                                      held[1].size)  # fmt: skip


def test_a_damaged_byte_in_a_set_aside_event_is_corruption_when_it_is_read_back(
    tmp_path: Path,
) -> None:
    writer = write(tmp_path, rows_events([10]), max_file_size=1 << 30)
    writer.close()
    (whole,) = [g for g in RelayReader(tmp_path, writer.files[0]).read(writer.position)
                if rows_of(g)]  # fmt: skip
    offset, _ = rows_of(whole)[3]
    reader = RelayReader(tmp_path, writer.files[0], hold_bytes=100)
    (group,) = [g for g in reader.read(writer.position) if g.aside_context is not None]
    path = tmp_path / writer.files[0]
    data = bytearray(path.read_bytes())
    data[offset + 40] ^= 0xFF  # inside the event's images, after it was read
    path.write_bytes(bytes(data))
    with pytest.raises(LogCorruptionError) as caught:
        list(group_events(tmp_path, group))
    assert (caught.value.file, caught.value.offset) == (writer.files[0], offset)
    assert "CRC32" in caught.value.message and "binlake binlog recover" in caught.value.hint
