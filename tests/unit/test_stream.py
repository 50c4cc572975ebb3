"""EventStream: reading events in order and stopping, never skipping, at the first bad byte."""

from __future__ import annotations

import pytest

from binlake.binlog.constants import FLAGS_OFFSET, IN_USE_FLAG_FILE_OFFSET, ChecksumAlg
from binlake.binlog.errors import (
    BinlogFormatError,
    ChecksumMismatchError,
    InvalidEventError,
    NotABinlogError,
    TruncatedEventError,
)
from binlake.binlog.events import MariaGtidEvent, XidEvent
from binlake.binlog.format import FormatContext
from binlake.binlog.stream import EventStream, ProblemKind, classify_problem
from binlog_builder import MARIADB_CTX, LogBuilder


def three_transactions() -> LogBuilder:
    log = LogBuilder().header()
    for _ in range(3):
        log.transaction(statements=2)
    return log


def test_events_come_back_in_order_with_offsets_and_end_positions() -> None:
    log = three_transactions()
    events = list(EventStream(log.bytes()))
    assert [e.offset for e in events] == log.offsets
    assert all(e.header.log_pos == e.end_offset for e in events)
    assert isinstance(events[0].payload, FormatContext)
    assert events[0].payload.has_checksum


def test_format_description_sets_the_context_for_later_events() -> None:
    stream = EventStream(three_transactions().bytes())
    list(stream)
    assert stream.ctx.server_version == MARIADB_CTX.server_version
    assert stream.ctx.post_header_lengths == MARIADB_CTX.post_header_lengths


def test_last_good_offset_is_the_end_of_the_whole_log_when_clean() -> None:
    data = three_transactions().bytes()
    stream = EventStream(data)
    list(stream)
    assert stream.last_good_offset == len(data)


def test_start_position_skips_earlier_events_but_reads_the_format_description() -> None:
    log = three_transactions()
    start = log.offsets[5]
    events = list(EventStream(log.bytes(), start=start))
    assert [e.offset for e in events] == log.offsets[5:]


def test_missing_magic_is_not_a_binlog() -> None:
    with pytest.raises(NotABinlogError):
        list(EventStream(b"GIF89a" + bytes(100)))


def test_file_shorter_than_magic_is_truncated() -> None:
    with pytest.raises(TruncatedEventError):
        list(EventStream(b"\xfeb"))


def test_first_event_must_be_a_format_description() -> None:
    log = LogBuilder()
    log.add(XidEvent(1))
    with pytest.raises(NotABinlogError, match="not Format_desc"):
        list(EventStream(log.bytes()))


def test_torn_header_at_tail_stops_with_last_good_offset_at_previous_event() -> None:
    data = three_transactions().bytes()
    cut = data + b"\x01\x02\x03"
    stream = EventStream(cut)
    with pytest.raises(TruncatedEventError) as info:
        list(stream)
    assert info.value.offset == len(data)
    assert stream.last_good_offset == len(data)


def test_torn_body_at_tail_names_the_event_offset() -> None:
    log = three_transactions()
    data = log.bytes()
    last = log.offsets[-1]
    stream = EventStream(data[: last + 20])
    with pytest.raises(TruncatedEventError) as info:
        list(stream)
    assert info.value.offset == last
    assert stream.last_good_offset == last


def test_garbage_length_smaller_than_header_is_invalid() -> None:
    data = bytearray(three_transactions().bytes())
    data += bytes(19)  # an all-zero header: size 0
    with pytest.raises(InvalidEventError, match="smaller than"):
        list(EventStream(data))


def test_crc_mismatch_is_raised_with_offset_and_event_type() -> None:
    log = three_transactions()
    data = bytearray(log.bytes())
    xid_offset = log.offsets[-1]
    data[xid_offset + 20] ^= 0x40
    with pytest.raises(ChecksumMismatchError) as info:
        list(EventStream(data))
    assert info.value.offset == xid_offset
    assert info.value.event_type == "Xid"


def test_a_version_flipped_to_one_before_checksums_is_refused_not_read_unverified() -> None:
    data = bytearray(three_transactions().bytes())
    version_at = 4 + 19 + 2  # magic, header, binlog version: the server version's first digit
    assert data[version_at : version_at + 3] == b"10."
    data[version_at] ^= 0x01  # "10.11..." reads "00.11...": a server that wrote no checksums
    with pytest.raises(InvalidEventError, match="predates binlog checksums") as info:
        list(EventStream(data))
    assert info.value.offset == 4


def test_format_description_crc_ignores_in_use_flag_cleared_in_place() -> None:
    data = bytearray(LogBuilder().header(in_use=True).bytes())
    assert data[IN_USE_FLAG_FILE_OFFSET] & 1
    data[4 + FLAGS_OFFSET] &= 0xFE  # what a server does on clean close: flag byte only
    events = list(EventStream(data))
    assert len(events) == 2


def test_corrupt_event_followed_by_valid_events_is_corruption() -> None:
    log = three_transactions()
    data = bytearray(log.bytes())
    bad = log.offsets[4]
    data[bad + 25] ^= 0xFF
    stream = EventStream(data)
    with pytest.raises(ChecksumMismatchError) as info:
        list(stream)
    assert classify_problem(data, info.value, stream.ctx) is ProblemKind.CORRUPTION


def test_corrupt_last_event_is_a_torn_tail() -> None:
    log = three_transactions()
    data = bytearray(log.bytes())
    data[-3] ^= 0x01
    stream = EventStream(data)
    with pytest.raises(ChecksumMismatchError) as info:
        list(stream)
    assert classify_problem(data, info.value, stream.ctx) is ProblemKind.TORN_TAIL


def test_garbage_tail_after_valid_events_is_a_torn_tail() -> None:
    data = three_transactions().bytes() + b"\x33" * 57
    stream = EventStream(data)
    with pytest.raises(BinlogFormatError) as info:
        list(stream)
    assert classify_problem(data, info.value, stream.ctx) is ProblemKind.TORN_TAIL


def test_without_checksums_only_a_short_event_counts_as_torn() -> None:
    ctx = FormatContext.default(ChecksumAlg.OFF)
    garbage = InvalidEventError("bad", offset=10)
    short = TruncatedEventError("short", offset=10)
    assert classify_problem(bytes(40), garbage, ctx) is ProblemKind.CORRUPTION
    assert classify_problem(bytes(40), short, ctx) is ProblemKind.TORN_TAIL


def test_not_a_binlog_is_always_corruption() -> None:
    error = NotABinlogError("no magic", offset=0)
    assert classify_problem(b"hello", error, MARIADB_CTX) is ProblemKind.CORRUPTION


def test_stream_without_magic_reads_replication_bytes() -> None:
    log = three_transactions()
    body = log.bytes()[4:]
    events = list(EventStream(body, expect_magic=False, ctx=MARIADB_CTX))
    assert len(events) == len(log.offsets)
    assert isinstance(events[2].payload, MariaGtidEvent)


def test_orphan_xid_at_the_tail_is_corruption_not_a_torn_write() -> None:
    from binlake.binlog.errors import OrphanEventError

    error = OrphanEventError("orphan", offset=4)
    assert classify_problem(b"", error, MARIADB_CTX) is ProblemKind.CORRUPTION


def test_crc_valid_event_that_fails_to_decode_is_corruption() -> None:
    log = three_transactions()
    data = log.bytes()
    error = InvalidEventError("malformed body", offset=log.offsets[-1])
    assert classify_problem(data, error, MARIADB_CTX) is ProblemKind.CORRUPTION
