"""RelayLogWriter: verbatim, verified appends; fsync only on request; rotation at boundaries."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from binlake.binlog.codec import decode_event
from binlake.binlog.constants import (
    HEADER_LEN,
    IN_USE_FLAG_FILE_OFFSET,
    MAGIC,
    ChecksumAlg,
    ColumnType,
    EventFlag,
)
from binlake.binlog.errors import (
    BinlogFormatError,
    ChecksumMismatchError,
    OrphanEventError,
    TruncatedEventError,
)
from binlake.binlog.events import AnnotateRowsEvent, MariaGtidEvent, XidEvent
from binlake.binlog.format import FormatContext
from binlake.binlog.transactions import EventGroup
from binlake.errors import RelayLogStateError
from binlake.position import RelayPosition
from binlake.relay.writer import MARIADB_10_11_POST_HEADER_LENGTHS, SERVER_VERSION, RelayLogWriter
from binlake.storage.durable import FSYNC_COUNTS, start_writeback
from binlake.storage.tail_scan import scan_file
from binlog_builder import MARIADB_CTX, LogBuilder
from binlog_fixtures import table_map
from relay_testing import check_recovered_log, gtid_seqs, source_log, split_events

EVENTS = split_events(source_log(6))
HEADER_EVENTS, TX_EVENTS = 2, 4


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[RelayLogWriter]:
    w = RelayLogWriter.open(tmp_path / "relay")
    yield w
    w.close()


def our_header_size(path: Path) -> int:
    data = path.read_bytes()
    return len(MAGIC) + int.from_bytes(data[4 + 9 : 4 + 13], "little")


def test_new_file_starts_with_magic_and_our_format_description_with_in_use_set(
    writer: RelayLogWriter,
) -> None:
    path = writer.folder / "relay-bin.000001"
    data = path.read_bytes()
    assert data[:4] == MAGIC
    assert data[IN_USE_FLAG_FILE_OFFSET] & EventFlag.BINLOG_IN_USE
    fde = decode_event(data[4:], FormatContext.default())
    assert isinstance(fde.payload, FormatContext)
    assert fde.payload.server_version == SERVER_VERSION
    assert fde.payload.checksum_alg == ChecksumAlg.CRC32
    assert bytes(fde.payload.post_header_lengths) == MARIADB_10_11_POST_HEADER_LENGTHS
    assert writer.position == RelayPosition("relay-bin.000001", len(data))


def test_clean_close_clears_in_use_and_the_crc_stays_valid(tmp_path: Path) -> None:
    writer = RelayLogWriter.open(tmp_path)
    for event in EVENTS:
        writer.append(event)
    writer.sync()
    writer.close()
    result = scan_file(tmp_path / "relay-bin.000001")
    assert not result.in_use
    assert result.clean
    assert result.transactions == 6


def test_events_are_appended_verbatim_after_our_header(writer: RelayLogWriter) -> None:
    path = writer.folder / "relay-bin.000001"
    for event in EVENTS:
        writer.append(event)
    writer.sync()
    assert path.read_bytes()[our_header_size(path) :] == b"".join(EVENTS)


def test_event_with_a_bad_crc_is_refused_and_nothing_is_written(writer: RelayLogWriter) -> None:
    writer.append(EVENTS[0])
    before = writer.position
    bad = bytearray(EVENTS[2])
    bad[HEADER_LEN + 1] ^= 0x01
    with pytest.raises(ChecksumMismatchError):
        writer.append(bytes(bad))
    assert writer.position == before
    writer.sync()
    assert (writer.folder / before.file).stat().st_size == before.offset
    writer.append(EVENTS[1])  # the writer stays usable: nothing was written


def test_short_event_is_refused(writer: RelayLogWriter) -> None:
    with pytest.raises(TruncatedEventError):
        writer.append(EVENTS[2][:10])


def test_orphan_xid_is_refused_before_writing(writer: RelayLogWriter) -> None:
    writer.append(EVENTS[0])
    before = writer.position
    orphan = LogBuilder()
    orphan.add(XidEvent(7))
    with pytest.raises(OrphanEventError):
        writer.append(orphan.bytes()[4:])
    writer.sync()
    assert (writer.folder / before.file).stat().st_size == before.offset


def test_source_format_description_switches_the_context(writer: RelayLogWriter) -> None:
    no_crc = FormatContext(
        4,
        MARIADB_CTX.server_version,
        0,
        19,
        MARIADB_CTX.post_header_lengths,
        ChecksumAlg.OFF,
        MARIADB_CTX.flavor,
    )
    log = LogBuilder(ctx=no_crc).header()
    log.transaction()
    events = split_events(log)
    for event in events:
        writer.append(event)  # events without a CRC32 are accepted after the source's FDE
    writer.sync()
    result = scan_file(writer.folder / "relay-bin.000001")
    assert result.clean and result.transactions == 1


def test_append_never_fsyncs_and_sync_fsyncs_once(writer: RelayLogWriter) -> None:
    before = FSYNC_COUNTS["relay"]
    for event in EVENTS:
        writer.append(event)
    assert FSYNC_COUNTS["relay"] == before
    writer.sync()
    assert FSYNC_COUNTS["relay"] == before + 1


def test_position_boundary_and_synced_follow_transactions(writer: RelayLogWriter) -> None:
    for event in EVENTS[: HEADER_EVENTS + TX_EVENTS + 2]:
        writer.append(event)
    assert writer.in_transaction
    assert writer.boundary.offset < writer.position.offset
    assert writer.synced is None
    for event in EVENTS[HEADER_EVENTS + TX_EVENTS + 2 : HEADER_EVENTS + 2 * TX_EVENTS]:
        writer.append(event)
    assert not writer.in_transaction
    assert writer.boundary == writer.position
    assert writer.sync() == writer.position == writer.synced


def test_rotation_by_size_happens_at_sync_on_a_boundary(tmp_path: Path) -> None:
    writer = RelayLogWriter.open(tmp_path, max_file_size=700)
    for event in EVENTS:
        writer.append(event)
        if writer.in_transaction:
            continue
        synced = writer.sync()
        assert synced.file != writer.position.file or synced.offset < 700
    writer.close()
    assert len(writer.files) > 2
    check_recovered_log(tmp_path)
    assert gtid_seqs(tmp_path) == [1, 2, 3, 4, 5, 6]


def test_sync_inside_a_transaction_never_rotates(tmp_path: Path) -> None:
    writer = RelayLogWriter.open(tmp_path, max_file_size=1)
    for event in EVENTS[: HEADER_EVENTS + 2]:
        writer.append(event)
    assert writer.in_transaction
    assert writer.sync().file == "relay-bin.000001" == writer.position.file
    for event in EVENTS[HEADER_EVENTS + 2 : HEADER_EVENTS + TX_EVENTS]:
        writer.append(event)
    writer.sync()
    assert writer.position.file == "relay-bin.000002"
    writer.close()


def test_rotate_inside_a_transaction_is_refused(writer: RelayLogWriter) -> None:
    for event in EVENTS[: HEADER_EVENTS + 1]:
        writer.append(event)
    with pytest.raises(RelayLogStateError, match="inside a transaction"):
        writer.rotate()


def test_rotated_file_repeats_the_source_format_description(writer: RelayLogWriter) -> None:
    for event in EVENTS[: HEADER_EVENTS + TX_EVENTS]:
        writer.append(event)
    writer.rotate()
    data = (writer.folder / "relay-bin.000002").read_bytes()
    assert data[our_header_size(writer.folder / "relay-bin.000002") :] == EVENTS[0]
    for event in EVENTS[HEADER_EVENTS + TX_EVENTS :]:
        writer.append(event)
    writer.sync()
    assert scan_file(writer.folder / "relay-bin.000002").transactions == 5


def test_open_recovers_the_old_tail_and_starts_a_new_file(tmp_path: Path) -> None:
    writer = RelayLogWriter.open(tmp_path)
    for event in EVENTS[: HEADER_EVENTS + TX_EVENTS + 2]:
        writer.append(event)
    writer.sync()
    writer.close()  # inside a transaction: IN_USE stays set
    assert scan_file(tmp_path / "relay-bin.000001").in_use
    again = RelayLogWriter.open(tmp_path)
    assert again.recovery is not None
    assert again.recovery.lines[0].startswith("trimmed ")
    assert again.position.file == "relay-bin.000002"
    again.close()
    check_recovered_log(tmp_path)
    assert gtid_seqs(tmp_path) == [1]


def test_closed_writer_refuses_appends(tmp_path: Path) -> None:
    writer = RelayLogWriter.open(tmp_path)
    writer.close()
    with pytest.raises(RelayLogStateError, match="closed"):
        writer.append(EVENTS[0])


def test_writer_purge_keeps_the_checkpoint_and_the_current_file(writer: RelayLogWriter) -> None:
    for _ in range(3):
        writer.rotate()
    assert writer.purge("relay-bin.000004", keep_from="relay-bin.000002") == ["relay-bin.000001"]
    assert writer.files == ["relay-bin.000002", "relay-bin.000003", "relay-bin.000004"]


def rows_transaction(rows_events: int) -> list[bytes]:
    """A MariaDB transaction as received: GTID, TABLE_MAP, ``rows_events`` rows events, XID."""
    tm = table_map((ColumnType.LONG,))
    log = LogBuilder().header()
    log.add(MariaGtidEvent(1, 0, 0, None, None, b""))
    log.add(tm)
    log.write_rows(tm, rows_events)
    log.add(XidEvent(1))
    return split_events(log)[HEADER_EVENTS:]


def assert_transaction_written_verbatim(
    writer: RelayLogWriter, events: list[bytes], start: int
) -> EventGroup:
    """The last append completed the transaction of ``events``, written from ``start`` as
    received; returns that group."""
    group = writer.last_group
    assert group is not None and group.is_transaction
    assert writer.boundary == writer.position
    writer.sync()
    data = (writer.folder / writer.position.file).read_bytes()
    assert data[start:] == b"".join(events)
    return group


def test_rows_events_received_inside_a_transaction_are_written_verbatim_and_grouped(
    writer: RelayLogWriter,
) -> None:
    events = rows_transaction(5)
    start = writer.position.offset
    for event in events[:-1]:
        writer.append(event, crc_checked=True)
        assert writer.last_group is None and writer.in_transaction
    writer.append(events[-1], crc_checked=True)
    group = assert_transaction_written_verbatim(writer, events, start)
    assert [e.type_name for e in group.events] == ["Gtid", "Xid"]  # its first and last only


def opened_transaction(writer: RelayLogWriter, rows_events: int) -> list[bytes]:
    """A received transaction (``rows_transaction``) whose GTID and TABLE_MAP are appended."""
    events = rows_transaction(rows_events)
    writer.append(events[0], crc_checked=True)
    writer.append(events[1], crc_checked=True)
    return events


def test_a_received_rows_event_whose_size_field_lies_is_refused_inside_a_transaction(
    writer: RelayLogWriter,
) -> None:
    events = opened_transaction(writer, 3)
    bad = bytearray(events[3])
    bad[9] ^= 0x01  # the header's size field: no longer the event's length
    received = [events[2], bytes(bad), events[4]]
    assert writer.append_rows_run(received, 0) == 1  # a run stops before it
    before = writer.position
    with pytest.raises(BinlogFormatError):
        writer.append(received[1], crc_checked=True)
    assert writer.position == before


def test_a_run_of_rows_events_inside_a_transaction_is_appended_in_one_step(
    writer: RelayLogWriter,
) -> None:
    events = rows_transaction(4)  # GTID, TABLE_MAP, 4 rows events, XID
    start = writer.position.offset
    assert writer.append_rows_run(events, 0) == 0  # no transaction open: nothing taken
    writer.append(events[0], crc_checked=True)
    assert writer.append_rows_run(events, 1) == 1  # a TABLE_MAP is not a rows event
    writer.append(events[1], crc_checked=True)
    assert writer.append_rows_run(events, 2) == 6  # the run stops before the XID
    assert writer.position.offset == start + sum(map(len, events[:6]))
    assert writer.last_group is None and writer.in_transaction
    writer.append(events[6], crc_checked=True)
    assert_transaction_written_verbatim(writer, events, start)


def test_an_annotate_rows_inside_a_transaction_is_taken_on_the_run_path(
    writer: RelayLogWriter,
) -> None:
    events = rows_transaction(2)  # GTID, TABLE_MAP, 2 rows events, XID
    log = LogBuilder().header()
    log.add(AnnotateRowsEvent(b"INSERT INTO t VALUES (0), (1)"))
    received = [events[0], split_events(log)[-1], *events[1:]]
    start = writer.position.offset
    assert writer.append_rows_run(received, 1) == 1  # no transaction open: nothing taken
    writer.append(received[0], crc_checked=True)
    assert writer.append_rows_run(received, 1) == 2  # the ANNOTATE_ROWS; then a TABLE_MAP
    writer.append(received[2], crc_checked=True)
    assert writer.append_rows_run(received, 3) == 5
    writer.append(received[5], crc_checked=True)
    group = assert_transaction_written_verbatim(writer, received, start)
    assert [e.type_name for e in group.events] == ["Gtid", "Xid"]


def test_a_rows_run_that_is_not_bytes_is_not_taken_on_the_run_path(
    writer: RelayLogWriter,
) -> None:
    events = opened_transaction(writer, 2)
    # A bytearray could change after its CRC32 was checked: only bytes objects take the run.
    assert writer.append_rows_run([bytearray(events[2])], 0) == 0


def test_start_writeback_leaves_a_file_unchanged_and_ignores_what_cannot_be_written_back(
    tmp_path: Path,
) -> None:
    path = tmp_path / "f"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    read_end, write_end = os.pipe()
    try:
        os.write(fd, b"abc")
        start_writeback(fd)
        start_writeback(read_end)  # a pipe has nothing to write back: no error
        assert path.read_bytes() == b"abc"
    finally:
        for each in (fd, read_end, write_end):
            os.close(each)
