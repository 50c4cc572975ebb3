"""How events and row values look in `binlake binlog dump`: one text line, or one JSON object.

The JSON form is a stable interface (tests and other tools parse it): ``type`` is the name
mariadb-binlog prints; decimals are strings, bytes base64, temporal values ISO-8601, NULL null.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
from typing import Any

from binlake.binlog.codec import BinlogEvent
from binlake.binlog.constants import ChecksumAlg
from binlake.binlog.events import (
    AnnotateRowsEvent,
    BinlogCheckpointEvent,
    GtidListEvent,
    HeartbeatEvent,
    IntvarEvent,
    MariaGtidEvent,
    MysqlGtidEvent,
    PreviousGtidsEvent,
    QueryEvent,
    RotateEvent,
    RowsQueryEvent,
    XaPrepareEvent,
    XidEvent,
)
from binlake.binlog.format import FormatContext
from binlake.binlog.names import TableName
from binlake.binlog.rows import ABSENT, Row, RowsEvent
from binlake.binlog.source_facts import ColumnHints, SourceFactsEvent, ZoneTimes
from binlake.binlog.tablemap import TableMap
from binlake.binlog.values import Geometry, ZeroDate

JsonValue = None | bool | int | float | str | list[Any] | dict[str, Any]
MAX_TEXT = 200


def iso_duration(value: dt.timedelta) -> str:
    """ISO-8601 duration with hours as the largest unit, as TIME values need (``-PT838H59M59S``)."""
    micros = value // dt.timedelta(microseconds=1)
    sign = "-" if micros < 0 else ""
    seconds, frac = divmod(abs(micros), 1_000_000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    tail = f"{secs}.{frac:06d}" if frac else f"{secs}"
    return f"{sign}PT{hours}H{minutes}M{tail}S"


def json_value(value: object) -> JsonValue:
    """A row value as JSON: exact, with a type-specific textual form where JSON has none."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else repr(value)
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return iso_duration(value)
    if isinstance(value, ZeroDate):
        return value.text
    if isinstance(value, Geometry):
        return {"srid": value.srid, "wkb": base64.b64encode(value.wkb).decode("ascii")}
    return str(value)


def row_json(row: Row, table: TableMap) -> dict[str, JsonValue]:
    names = table.column_names or tuple(f"@{i + 1}" for i in range(len(row)))
    return {name: json_value(v) for name, v in zip(names, row, strict=True) if v is not ABSENT}


def _short(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace").replace("\n", " ")
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."


def _describe_fde(ctx: FormatContext) -> str:
    names: dict[int, str] = {ChecksumAlg.CRC32: "CRC32", ChecksumAlg.OFF: "none"}
    alg = names.get(ctx.checksum_alg, "?")
    return f"server {ctx.server_version}, binlog v{ctx.binlog_version}, checksum {alg}"


def describe(event: BinlogEvent, table: TableMap | None) -> str:
    """A short, human description of an event's payload."""
    p = event.payload
    match p:
        case FormatContext():
            return _describe_fde(p)
        case QueryEvent():
            return f"db={p.database} {_short(p.query)}" if p.database else _short(p.query)
        case MariaGtidEvent():
            return p.gtid(event.header.server_id) + (" standalone" if p.standalone else "")
        case MysqlGtidEvent():
            return p.gtid or "anonymous"
        case XidEvent():
            return f"xid={p.xid}"
        case RotateEvent():
            return f"next {p.next_file} at {p.position}"
        case GtidListEvent():
            return f"[{p.text()}]"
        case PreviousGtidsEvent():
            return f"[{p.text()}]"
        case BinlogCheckpointEvent() | HeartbeatEvent():
            return p.log_file
        case AnnotateRowsEvent() | RowsQueryEvent():
            return _short(p.query)
        case IntvarEvent():
            return f"{'LAST_INSERT_ID' if p.kind == 1 else 'INSERT_ID'}={p.value}"
        case XaPrepareEvent():
            return f"XA PREPARE gtrid={p.gtrid!r} one_phase={p.one_phase}"
        case TableMap():
            return f"{p.qualified_name} (table id {p.table_id}, {p.column_count} columns)"
        case RowsEvent():
            name = table.qualified_name if table is not None else "?"
            return f"table id {p.table_id} ({name})"
        case SourceFactsEvent():
            return _describe_facts(p.fact)
    return ""


def _describe_facts(fact: ColumnHints | ZoneTimes) -> str:
    """binlake's source facts (binlog/source_facts.py), in a line."""
    if isinstance(fact, ColumnHints):
        hints = ", ".join(f"{name} {hint}" for name, hint in sorted(fact.hints.items()))
        return f"source facts: {TableName(fact.database, fact.table)} hints [{hints}]"
    return (
        f"source facts: time zone {fact.zone}, {len(fact.local_times)} local times, "
        f"{len(fact.instants)} instants"
    )


def event_json(event: BinlogEvent, table: TableMap | None) -> dict[str, JsonValue]:
    h = event.header
    out: dict[str, JsonValue] = {
        "type": h.type_name,
        "offset": event.offset,
        "size": h.event_size,
        "end_log_pos": h.log_pos,
        "server_id": h.server_id,
        "timestamp": h.timestamp,
    }
    if isinstance(event.payload, RowsEvent | TableMap) and table is not None:
        out["table"] = table.qualified_name
    if isinstance(event.payload, MariaGtidEvent | MysqlGtidEvent):
        gtid = describe(event, None).split()[0]
        out["gtid"] = None if gtid == "anonymous" else gtid
    if isinstance(event.payload, QueryEvent):
        out["database"] = event.payload.database
        out["query"] = event.payload.text
    if isinstance(event.payload, XidEvent):
        out["xid"] = event.payload.xid
    out["info"] = describe(event, table)
    return out
