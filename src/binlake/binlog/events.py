"""Payloads of the non-row events, each with a decoder and an encoder.

A decoder takes the event *body*: the bytes after the 19-byte common header and before the CRC32
trailer, and returns a frozen dataclass. An encoder returns that body. Framing (header, CRC) is
in ``binlake.binlog.codec``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from binlake.binlog.constants import EventType, event_type_name
from binlake.binlog.errors import InvalidEventError
from binlake.binlog.format import FormatContext
from binlake.binlog.query_status import QueryStatus, decode_query_status, encode_query_status
from binlake.binlog.source_facts import (
    SourceFactsEvent,
    decode_source_facts,
    encode_source_facts,
    is_source_facts,
)

Body = bytes | memoryview

#: MariaDB pads a GTID body with zeros up to its 19-byte post-header length.
MARIA_GTID_MIN_BODY = 19


class _Cursor:
    """Bounds-checked little-endian reads over one event body."""

    __slots__ = ("buf", "event_type", "offset", "pos")

    def __init__(self, buf: Body, event_type: str, offset: int) -> None:
        self.buf = buf
        self.pos = 0
        self.event_type = event_type
        self.offset = offset

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise InvalidEventError(
                f"body ends at byte {len(self.buf)}, field needs bytes {self.pos}..{end}",
                offset=self.offset,
                event_type=self.event_type,
            )
        out = bytes(self.buf[self.pos : end])
        self.pos = end
        return out

    def uint(self, n: int) -> int:
        return int.from_bytes(self.take(n), "little")

    def sint(self, n: int) -> int:
        return int.from_bytes(self.take(n), "little", signed=True)

    def rest(self) -> bytes:
        return self.take(len(self.buf) - self.pos)

    def done(self) -> bool:
        return self.pos == len(self.buf)


FL_STANDALONE: Final = 1
FL_GROUP_COMMIT_ID: Final = 2
FL_TRANSACTIONAL: Final = 4
FL_DDL: Final = 32
FL_PREPARED_XA: Final = 64
FL_COMPLETED_XA: Final = 128


@dataclass(frozen=True, slots=True)
class RotateEvent:
    position: int
    next_file: str
    type_code: int = EventType.ROTATE


@dataclass(frozen=True, slots=True)
class QueryEvent:
    thread_id: int
    exec_time: int
    error_code: int
    status: QueryStatus
    database: str
    query: bytes
    type_code: int = EventType.QUERY

    @property
    def text(self) -> str:
        return self.query.decode("utf-8", "replace")

    @property
    def keyword(self) -> str:
        """The statement's first word in upper case (BEGIN, COMMIT, ALTER, XA ...)."""
        head = self.query[:16].lstrip().split(None, 1)
        return head[0].decode("ascii", "replace").upper().rstrip(";") if head else ""


@dataclass(frozen=True, slots=True)
class XidEvent:
    xid: int
    type_code: int = EventType.XID


@dataclass(frozen=True, slots=True)
class StopEvent:
    type_code: int = EventType.STOP


@dataclass(frozen=True, slots=True)
class HeartbeatEvent:
    log_file: str
    type_code: int = EventType.HEARTBEAT


@dataclass(frozen=True, slots=True)
class IntvarEvent:
    kind: int  # 1 LAST_INSERT_ID, 2 INSERT_ID
    value: int
    type_code: int = EventType.INTVAR


@dataclass(frozen=True, slots=True)
class RandEvent:
    seed1: int
    seed2: int
    type_code: int = EventType.RAND


@dataclass(frozen=True, slots=True)
class UserVarEvent:
    name: bytes
    value_type: int | None  # None when the value is NULL
    charset: int
    value: bytes
    flags: int | None  # 1 = unsigned; absent in old servers
    type_code: int = EventType.USER_VAR


@dataclass(frozen=True, slots=True)
class MariaGtidEvent:
    """MariaDB GTID: domain-server-seq, with flags saying whether a group follows."""

    seq_no: int
    domain_id: int
    flags2: int
    commit_id: int | None
    xa_xid: bytes | None  # format id, gtrid and bqual as stored, for XA groups
    extra: bytes  # later extensions (flags_extra, ...) kept verbatim
    type_code: int = EventType.MARIADB_GTID

    @property
    def standalone(self) -> bool:
        return bool(self.flags2 & FL_STANDALONE)

    def gtid(self, server_id: int) -> str:
        return f"{self.domain_id}-{server_id}-{self.seq_no}"


@dataclass(frozen=True, slots=True)
class GtidListEvent:
    gtids: tuple[tuple[int, int, int], ...]  # (domain, server, seq_no)
    flags: int
    type_code: int = EventType.GTID_LIST

    def text(self) -> str:
        return ",".join(f"{d}-{s}-{n}" for d, s, n in self.gtids)


@dataclass(frozen=True, slots=True)
class BinlogCheckpointEvent:
    log_file: str
    type_code: int = EventType.BINLOG_CHECKPOINT


@dataclass(frozen=True, slots=True)
class AnnotateRowsEvent:
    query: bytes
    type_code: int = EventType.ANNOTATE_ROWS


@dataclass(frozen=True, slots=True)
class RowsQueryEvent:
    query: bytes
    type_code: int = EventType.ROWS_QUERY


@dataclass(frozen=True, slots=True)
class MysqlGtidEvent:
    """MySQL GTID or ANONYMOUS_GTID: uuid:gno plus logical clock; later fields kept verbatim."""

    commit_flag: int
    sid: uuid.UUID
    gno: int
    last_committed: int
    sequence_number: int
    extra: bytes
    type_code: int = EventType.MYSQL_GTID

    @property
    def gtid(self) -> str | None:
        return None if self.type_code == EventType.ANONYMOUS_GTID else f"{self.sid}:{self.gno}"


@dataclass(frozen=True, slots=True)
class PreviousGtidsEvent:
    sets: tuple[tuple[uuid.UUID, tuple[tuple[int, int], ...]], ...]  # intervals [start, end)
    type_code: int = EventType.PREVIOUS_GTIDS

    def text(self) -> str:
        parts = []
        for sid, intervals in self.sets:
            spans = ":".join(f"{a}" if b == a + 1 else f"{a}-{b - 1}" for a, b in intervals)
            parts.append(f"{sid}:{spans}")
        return ",".join(parts)


@dataclass(frozen=True, slots=True)
class XaPrepareEvent:
    one_phase: bool
    format_id: int
    gtrid: bytes
    bqual: bytes
    type_code: int = EventType.XA_PREPARE


@dataclass(frozen=True, slots=True)
class IncidentEvent:
    incident: int
    message: bytes
    type_code: int = EventType.INCIDENT


@dataclass(frozen=True, slots=True)
class UnknownEvent:
    """An event binlake does not interpret; its body is kept verbatim."""

    type_code: int
    body: bytes


def _str(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def decode_rotate(c: _Cursor, ctx: FormatContext) -> RotateEvent:
    position = c.uint(8) if ctx.post_header_len(EventType.ROTATE) >= 8 else 4
    return RotateEvent(position, _str(c.rest()))


def decode_query(c: _Cursor, ctx: FormatContext) -> QueryEvent:
    thread_id, exec_time, db_len, error_code = c.uint(4), c.uint(4), c.uint(1), c.uint(2)
    status_len = c.uint(2) if ctx.post_header_len(EventType.QUERY) >= 13 else 0
    c.take(max(0, ctx.post_header_len(EventType.QUERY) - 13))
    status = decode_query_status(c.take(status_len))
    database = _str(c.take(db_len))
    c.take(1)  # the NUL after the database name
    return QueryEvent(thread_id, exec_time, error_code, status, database, c.rest())


def decode_user_var(c: _Cursor, _ctx: FormatContext) -> UserVarEvent:
    name = c.take(c.uint(4))
    if c.uint(1):
        return UserVarEvent(name, None, 0, b"", None)
    value_type, charset = c.uint(1), c.uint(4)
    value = c.take(c.uint(4))
    flags = None if c.done() else c.uint(1)
    return UserVarEvent(name, value_type, charset, value, flags)


def decode_maria_gtid(c: _Cursor, _ctx: FormatContext) -> MariaGtidEvent:
    seq_no, domain_id, flags2 = c.uint(8), c.uint(4), c.uint(1)
    commit_id = xa_xid = None
    if flags2 & FL_GROUP_COMMIT_ID:
        commit_id = c.uint(8)
    if flags2 & (FL_PREPARED_XA | FL_COMPLETED_XA):
        head = c.take(6)
        xa_xid = head + c.take(head[4] + head[5])
    extra = c.rest()
    if len(c.buf) == MARIA_GTID_MIN_BODY:
        extra = extra.rstrip(b"\0")  # zero padding up to the post-header length
    return MariaGtidEvent(seq_no, domain_id, flags2, commit_id, xa_xid, extra)


def decode_gtid_list(c: _Cursor, _ctx: FormatContext) -> GtidListEvent:
    word = c.uint(4)
    count, flags = word & 0x0FFFFFFF, word >> 28
    gtids = tuple((c.uint(4), c.uint(4), c.uint(8)) for _ in range(count))
    return GtidListEvent(gtids, flags)


def decode_mysql_gtid(c: _Cursor, _ctx: FormatContext, type_code: int) -> MysqlGtidEvent:
    commit_flag, sid, gno = c.uint(1), uuid.UUID(bytes=c.take(16)), c.sint(8)
    last_committed = sequence_number = 0
    if not c.done() and c.uint(1) == 2:  # logical-clock type code
        last_committed, sequence_number = c.sint(8), c.sint(8)
    return MysqlGtidEvent(
        commit_flag, sid, gno, last_committed, sequence_number, c.rest(), type_code
    )


def decode_previous_gtids(c: _Cursor, _ctx: FormatContext) -> PreviousGtidsEvent:
    sets = []
    for _ in range(c.uint(8)):
        sid = uuid.UUID(bytes=c.take(16))
        intervals = tuple((c.sint(8), c.sint(8)) for _ in range(c.uint(8)))
        sets.append((sid, intervals))
    return PreviousGtidsEvent(tuple(sets))


def decode_xa_prepare(c: _Cursor, _ctx: FormatContext) -> XaPrepareEvent:
    one_phase, format_id, gtrid_len, bqual_len = c.uint(1), c.uint(4), c.uint(4), c.uint(4)
    return XaPrepareEvent(bool(one_phase), format_id, c.take(gtrid_len), c.take(bqual_len))


def decode_incident(c: _Cursor, _ctx: FormatContext) -> IncidentEvent:
    incident = c.uint(2)
    return IncidentEvent(incident, c.take(c.uint(1)) if not c.done() else b"")


ControlPayload = (
    RotateEvent
    | QueryEvent
    | XidEvent
    | StopEvent
    | HeartbeatEvent
    | IntvarEvent
    | RandEvent
    | UserVarEvent
    | MariaGtidEvent
    | GtidListEvent
    | BinlogCheckpointEvent
    | AnnotateRowsEvent
    | RowsQueryEvent
    | MysqlGtidEvent
    | PreviousGtidsEvent
    | XaPrepareEvent
    | IncidentEvent
    | SourceFactsEvent
    | UnknownEvent
)

_DECODERS: dict[int, Callable[[_Cursor, FormatContext], ControlPayload]] = {
    EventType.ROTATE: decode_rotate,
    EventType.QUERY: decode_query,
    EventType.XID: lambda c, _: XidEvent(c.uint(8)),
    EventType.STOP: lambda c, _: StopEvent(),
    EventType.HEARTBEAT: lambda c, _: HeartbeatEvent(_str(c.rest())),
    EventType.INTVAR: lambda c, _: IntvarEvent(c.uint(1), c.uint(8)),
    EventType.RAND: lambda c, _: RandEvent(c.uint(8), c.uint(8)),
    EventType.USER_VAR: decode_user_var,
    EventType.MARIADB_GTID: decode_maria_gtid,
    EventType.GTID_LIST: decode_gtid_list,
    EventType.BINLOG_CHECKPOINT: lambda c, _: BinlogCheckpointEvent(_str(c.take(c.uint(4)))),
    EventType.ANNOTATE_ROWS: lambda c, _: AnnotateRowsEvent(c.rest()),
    EventType.ROWS_QUERY: lambda c, _: RowsQueryEvent(c.take(len(c.buf))[1:]),
    EventType.MYSQL_GTID: lambda c, x: decode_mysql_gtid(c, x, EventType.MYSQL_GTID),
    EventType.ANONYMOUS_GTID: lambda c, x: decode_mysql_gtid(c, x, EventType.ANONYMOUS_GTID),
    EventType.PREVIOUS_GTIDS: decode_previous_gtids,
    EventType.XA_PREPARE: decode_xa_prepare,
    EventType.INCIDENT: decode_incident,
}


def decode_control(type_code: int, body: Body, ctx: FormatContext, offset: int) -> ControlPayload:
    """Decode the body of a non-row event; types binlake does not interpret become UnknownEvent
    (so does an IGNORABLE event that is not binlake's source facts)."""
    if type_code == EventType.IGNORABLE and is_source_facts(body):
        return decode_source_facts(body, offset)
    decoder = _DECODERS.get(type_code)
    if decoder is None:
        return UnknownEvent(type_code, bytes(body))
    cursor = _Cursor(body, event_type_name(type_code), offset)
    try:
        return decoder(cursor, ctx)
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidEventError(
            f"malformed body: {exc}", offset=offset, event_type=cursor.event_type
        ) from exc


def _u(n: int, value: int) -> bytes:
    return value.to_bytes(n, "little")


def _s(n: int, value: int) -> bytes:
    return value.to_bytes(n, "little", signed=True)


def encode_query(ev: QueryEvent) -> bytes:
    status = encode_query_status(ev.status)
    db = ev.database.encode()
    head = _u(4, ev.thread_id) + _u(4, ev.exec_time) + _u(1, len(db)) + _u(2, ev.error_code)
    return head + _u(2, len(status)) + status + db + b"\0" + ev.query


def encode_maria_gtid(ev: MariaGtidEvent) -> bytes:
    out = _u(8, ev.seq_no) + _u(4, ev.domain_id) + _u(1, ev.flags2)
    if ev.commit_id is not None:
        out += _u(8, ev.commit_id)
    if ev.xa_xid is not None:
        out += ev.xa_xid
    return (out + ev.extra).ljust(MARIA_GTID_MIN_BODY, b"\0")


def encode_user_var(ev: UserVarEvent) -> bytes:
    out = _u(4, len(ev.name)) + ev.name
    if ev.value_type is None:
        return out + b"\x01"
    out += b"\0" + _u(1, ev.value_type) + _u(4, ev.charset) + _u(4, len(ev.value)) + ev.value
    return out if ev.flags is None else out + _u(1, ev.flags)


def encode_mysql_gtid(ev: MysqlGtidEvent) -> bytes:
    head = _u(1, ev.commit_flag) + ev.sid.bytes + _s(8, ev.gno)
    return head + b"\x02" + _s(8, ev.last_committed) + _s(8, ev.sequence_number) + ev.extra


def encode_previous_gtids(ev: PreviousGtidsEvent) -> bytes:
    out = _u(8, len(ev.sets))
    for sid, intervals in ev.sets:
        out += sid.bytes + _u(8, len(intervals))
        out += b"".join(_s(8, a) + _s(8, b) for a, b in intervals)
    return out


def encode_control(ev: ControlPayload) -> bytes:
    """The body of a non-row event (inverse of ``decode_control``)."""
    match ev:
        case RotateEvent():
            return _u(8, ev.position) + ev.next_file.encode()
        case QueryEvent():
            return encode_query(ev)
        case XidEvent():
            return _u(8, ev.xid)
        case StopEvent():
            return b""
        case HeartbeatEvent():
            return ev.log_file.encode()
        case IntvarEvent():
            return _u(1, ev.kind) + _u(8, ev.value)
        case RandEvent():
            return _u(8, ev.seed1) + _u(8, ev.seed2)
        case UserVarEvent():
            return encode_user_var(ev)
        case MariaGtidEvent():
            return encode_maria_gtid(ev)
        case GtidListEvent():
            word = _u(4, len(ev.gtids) | (ev.flags << 28))
            return word + b"".join(_u(4, d) + _u(4, s) + _u(8, n) for d, s, n in ev.gtids)
        case BinlogCheckpointEvent():
            return _u(4, len(ev.log_file.encode())) + ev.log_file.encode()
        case AnnotateRowsEvent():
            return ev.query
        case RowsQueryEvent():
            return _u(1, min(len(ev.query), 255)) + ev.query
        case MysqlGtidEvent():
            return encode_mysql_gtid(ev)
        case PreviousGtidsEvent():
            return encode_previous_gtids(ev)
        case XaPrepareEvent():
            head = _u(1, ev.one_phase) + _u(4, ev.format_id)
            return head + _u(4, len(ev.gtrid)) + _u(4, len(ev.bqual)) + ev.gtrid + ev.bqual
        case IncidentEvent():
            return _u(2, ev.incident) + _u(1, len(ev.message)) + ev.message
        case SourceFactsEvent():
            return encode_source_facts(ev)
        case UnknownEvent():
            return ev.body
    raise TypeError(f"not an event payload: {type(ev).__name__}")
