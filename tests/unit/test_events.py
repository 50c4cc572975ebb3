"""Control events: every payload survives encode -> decode; malformed bodies are typed errors."""

from __future__ import annotations

import uuid

import pytest

from binlake.binlog.codec import Payload, decode_event, encode_event
from binlake.binlog.constants import EventType
from binlake.binlog.errors import InvalidEventError
from binlake.binlog.events import (
    FL_GROUP_COMMIT_ID,
    FL_PREPARED_XA,
    FL_TRANSACTIONAL,
    AnnotateRowsEvent,
    BinlogCheckpointEvent,
    GtidListEvent,
    HeartbeatEvent,
    IncidentEvent,
    IntvarEvent,
    MariaGtidEvent,
    MysqlGtidEvent,
    PreviousGtidsEvent,
    QueryEvent,
    RandEvent,
    RotateEvent,
    RowsQueryEvent,
    StopEvent,
    UnknownEvent,
    UserVarEvent,
    XaPrepareEvent,
    XidEvent,
    decode_control,
)
from binlake.binlog.format import FormatContext
from binlake.binlog.header import decode_header
from binlake.binlog.query_status import decode_query_status
from binlog_builder import MARIADB_CTX, NO_STATUS, query

SID = uuid.UUID("3e11fa47-71ca-11e1-9e33-c80aa9429562")

PAYLOADS: list[Payload] = [
    MARIADB_CTX,
    RotateEvent(4, "mariadb-bin.000007"),
    query("CREATE TABLE t (id INT)"),
    XidEvent(2**64 - 1),
    StopEvent(),
    HeartbeatEvent("mariadb-bin.000003"),
    IntvarEvent(2, 12345),
    RandEvent(1, 2**63),
    UserVarEvent(b"v", 0, 45, b"text", 0),
    UserVarEvent(b"nothing", None, 0, b"", None),
    MariaGtidEvent(99, 3, FL_TRANSACTIONAL, None, None, b""),
    MariaGtidEvent(7, 0, FL_GROUP_COMMIT_ID, 1234, None, b""),
    MariaGtidEvent(8, 0, FL_PREPARED_XA, None, b"\x01\0\0\0\x02\x01x1b", b""),
    GtidListEvent(((0, 1, 10), (5, 2, 3)), 0),
    BinlogCheckpointEvent("mariadb-bin.000001"),
    AnnotateRowsEvent(b"INSERT INTO t VALUES (1)"),
    RowsQueryEvent(b"UPDATE t SET a = 1"),
    MysqlGtidEvent(1, SID, 42, 10, 11, b"\x01\x02"),
    MysqlGtidEvent(1, uuid.UUID(int=0), 0, 0, 1, b"", EventType.ANONYMOUS_GTID),
    PreviousGtidsEvent(((SID, ((1, 43), (50, 51))),)),
    XaPrepareEvent(False, 1, b"gtrid", b"bq"),
    IncidentEvent(1, b"LOST_EVENTS"),
    UnknownEvent(250, b"\x00\x01payload"),
]


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: type(p).__name__)
def test_payload_round_trips_through_bytes(payload: Payload) -> None:
    raw = encode_event(payload, MARIADB_CTX, timestamp=5, server_id=9, log_pos=123)
    event = decode_event(raw, MARIADB_CTX, offset=4)
    assert event.payload == payload
    assert event.raw == raw
    assert event.header.event_size == len(raw)
    assert encode_event(event.payload, MARIADB_CTX, timestamp=5, server_id=9, log_pos=123) == raw


def test_query_keyword_and_database_are_decoded() -> None:
    raw = encode_event(query("  begin", database="shop"), MARIADB_CTX)
    event = decode_event(raw, MARIADB_CTX)
    assert isinstance(event.payload, QueryEvent)
    assert event.payload.keyword == "BEGIN"
    assert event.payload.database == "shop"


def test_query_status_variables_decode_known_codes_and_keep_raw_bytes() -> None:
    raw = (
        b"\x00\x00\x00\x00\x00"  # flags2
        + b"\x01"
        + (1411383296).to_bytes(8, "little")  # sql_mode
        + b"\x04"
        + bytes.fromhex("2d002d002d00")  # charset client/connection/server = 45
        + b"\x05\x06+00:00"  # time zone
        + b"\x81"
        + (7).to_bytes(8, "little")  # MariaDB xid
    )
    status = decode_query_status(raw)
    assert status.get("sql_mode") == 1411383296
    assert status.get("charset") == (45, 45, 45)
    assert status.get("time_zone") == "+00:00"
    assert status.get("xid") == 7
    assert status.unknown_at is None
    assert status.raw == raw


def test_unknown_status_code_stops_decoding_and_says_where() -> None:
    status = decode_query_status(b"\x00\x00\x00\x00\x00\xfe\x01\x02")
    assert status.get("flags2") == 0
    assert status.unknown_at == 5


def test_truncated_gtid_body_is_invalid_event_with_offset() -> None:
    with pytest.raises(InvalidEventError) as info:
        decode_control(EventType.MARIADB_GTID, b"\x01\x02\x03", MARIADB_CTX, offset=330)
    assert info.value.offset == 330
    assert info.value.event_type == "Gtid"


def test_event_size_disagreeing_with_given_bytes_is_invalid() -> None:
    raw = encode_event(XidEvent(1), MARIADB_CTX)
    with pytest.raises(InvalidEventError, match="declares"):
        decode_event(raw + b"\0", MARIADB_CTX)


def test_ignorable_flag_is_reported_by_the_header() -> None:
    raw = encode_event(UnknownEvent(200, b"x"), MARIADB_CTX, flags=0x80)
    assert decode_header(raw).is_ignorable


def test_format_description_without_checksum_still_has_four_trailing_bytes() -> None:
    ctx = FormatContext(
        4, "10.11.19-MariaDB", 0, 19, MARIADB_CTX.post_header_lengths, 0, MARIADB_CTX.flavor
    )
    raw = encode_event(ctx, ctx)
    event = decode_event(raw, ctx)
    assert event.payload == ctx
    assert not ctx.has_checksum


def test_query_without_status_survives() -> None:
    ev = QueryEvent(3, 1, 1064, NO_STATUS, "", b"BAD SQL")
    raw = encode_event(ev, MARIADB_CTX)
    assert decode_event(raw, MARIADB_CTX).payload == ev
