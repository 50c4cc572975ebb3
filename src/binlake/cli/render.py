"""How events and row values look in `binlake binlog dump`: one text line, or one JSON object.

The JSON form is a stable interface (tests and other tools parse it): ``type`` is the name
mariadb-binlog prints; decimals are strings, bytes base64, temporal values ISO-8601, NULL null.

``json_value`` and ``json.dumps`` say what the JSON of a value is; ``DumpRenderer`` writes the
same text without building a dict a row or an encoder a line: a table's keys are quoted once
(``RowFormat``), the common value types (int, str, float, Decimal, bytes, date and time) and
an event's fields (``object_text``) are turned into text directly, any other value through
``json_value`` and the encoder (tests/unit/test_dump_output.py pins the bytes,
tests/property/test_dump_render_properties.py holds the two ways to each other). When this
process runs the compiled modules, a row's text is written in C (``_rowtext.c``, ``NATIVE``),
byte for byte what ``RowFormat.python_text``, the reference, writes.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import importlib
import json
import math
from json.encoder import encode_basestring as quote
from types import ModuleType
from typing import Any, Final

from binlake.binlog import rowplan
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
from binlake.binlog.rows import ABSENT, Row, RowChange, RowsEvent
from binlake.binlog.source_facts import ColumnHints, SourceFactsEvent, ZoneTimes
from binlake.binlog.tablemap import TableMap
from binlake.binlog.values import Geometry, ZeroDate

JsonValue = None | bool | int | float | str | list[Any] | dict[str, Any]
MAX_TEXT = 200
#: ``json.dumps(obj, ensure_ascii=False)``'s encoder, made once rather than once a call.
ENCODER = json.JSONEncoder(ensure_ascii=False)
SIDE_INDENT = " " * 12


def load_native() -> ModuleType | None:
    """The C row renderer (``_rowtext.c``) when this process runs the compiled modules, else
    None: read off the C row decoder, which ``rowplan`` loads on that condition alone (the build
    record names ``_rowtext.c`` too, so a current build has both and a stale one neither)."""
    if rowplan.NATIVE is None:
        return None
    return importlib.import_module("binlake.cli._rowtext")


#: The C row renderer, or None: pure Python (``BINLAKE_PURE_PYTHON=1``, no build, a stale build).
NATIVE: Final = load_native()


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


def value_text(value: object) -> str:
    """``ENCODER.encode(json_value(value))``: the common types directly, the others through it."""
    if type(value) is int:
        return str(value)
    if value is None:
        return "null"
    if type(value) is str:
        return quote(value)
    if type(value) is float:
        return repr(value) if math.isfinite(value) else f'"{value!r}"'
    if type(value) is decimal.Decimal:
        return '"' + str(value) + '"'  # not f'"{value}"': Decimal.__format__ is 3x slower
    if type(value) is bytes:
        return f'"{base64.b64encode(value).decode("ascii")}"'
    if type(value) is dt.datetime or type(value) is dt.date:
        return f'"{value.isoformat()}"'
    return ENCODER.encode(json_value(value))


def object_text(obj: dict[str, JsonValue]) -> str:
    """``ENCODER.encode(obj)``, the strings, ints and nulls of an event's fields directly."""
    parts = []
    for key, value in obj.items():
        if value is None or type(value) is int or type(value) is str:
            parts.append(f"{quote(key)}: {value_text(value)}")
        else:
            parts.append(f"{quote(key)}: {ENCODER.encode(value)}")
    return "{" + ", ".join(parts) + "}"


class RowFormat:
    """How the rows of one table shape are written: the quoted keys (``"name": ``), made once,
    and in ``python_text`` a column's date or time text, made once for a run of equal values
    (the rows of one statement often share a NOW(), an update's two images an unchanged
    column; the C renderer writes dates directly)."""

    def __init__(self, names: tuple[str, ...]) -> None:
        keys = [f"{quote(name)}: " for name in names]
        self.firsts = tuple("{" + key for key in keys)  # a key that opens the object
        self.others = tuple(", " + key for key in keys)  # a key after another
        self.last: list[object] = [None] * len(names)
        self.last_text = [""] * len(names)

    def text(self, row: Row) -> str:
        """``ENCODER.encode(row_json(row, table))``: in C when loaded, else ``python_text``."""
        if NATIVE is None:
            return self.python_text(row)
        text: str = NATIVE.row_text(row, self.firsts, self.others, ABSENT, value_text)
        return text

    def python_text(self, row: Row) -> str:
        """``ENCODER.encode(row_json(row, table))``: pieces joined once, none concatenated."""
        if len(row) != len(self.firsts):
            raise ValueError(f"a row of {len(row)} values for {len(self.firsts)} columns")
        parts: list[str] = []
        for column, value in enumerate(row):
            if value is ABSENT:
                continue
            parts.append(self.others[column] if parts else self.firsts[column])
            if type(value) is dt.datetime or type(value) is dt.date:
                parts.append(self._temporal_text(column, value))
            else:
                parts.append(value_text(value))
        if not parts:
            return "{}"
        parts.append("}")
        return "".join(parts)

    def _temporal_text(self, column: int, value: dt.date) -> str:
        if not same_text(self.last[column], value):
            self.last[column] = value
            self.last_text[column] = f'"{value.isoformat()}"'
        return self.last_text[column]


def same_text(last: object, value: dt.date) -> bool:
    """Whether ``last``'s ISO text is ``value``'s: equal and of one type, and for datetimes of
    one zone and fold (equal aware datetimes of two zones, or of one zone's repeated hour,
    print different offsets)."""
    if type(last) is not type(value) or last != value:
        return False
    if isinstance(last, dt.datetime) and isinstance(value, dt.datetime):
        return last.tzinfo is value.tzinfo and last.fold == value.fold
    return True


class RowFormats:
    """The ``RowFormat`` of each table shape, made once a shape."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, ...] | int, RowFormat] = {}

    def of(self, table: TableMap, width: int) -> RowFormat:
        """The format of a row of ``width`` values of ``table`` (``@1``... when it names none)."""
        shape = table.column_names or width
        found = self._known.get(shape)
        if found is None:
            names = table.column_names or tuple(f"@{i + 1}" for i in range(width))
            found = self._known[shape] = RowFormat(names)
        return found


class DumpRenderer:
    """The lines `binlake binlog dump` prints for an event, as text or JSON, with or without
    its decoded rows (``changes``: ``None`` without ``--rows``)."""

    def __init__(self, *, as_json: bool) -> None:
        self.as_json = as_json
        self.formats = RowFormats()

    def render(
        self, event: BinlogEvent, table: TableMap | None, changes: list[RowChange] | None
    ) -> str:
        """The event's lines, each ending in a newline."""
        if self.as_json:
            return self._json_line(event, table, changes)
        h = event.header
        head = (
            f"{event.offset:>10} {h.type_name:<18} size={h.event_size:<7} "
            f"end_log_pos={h.log_pos:<10} {describe(event, table)}\n"
        )
        if not changes or table is None:
            return head
        lines = [head]
        for before, after in changes:
            if before is not None:
                lines.append(f"{SIDE_INDENT}before: {self._row(before, table)}\n")
            if after is not None:
                lines.append(f"{SIDE_INDENT}after: {self._row(after, table)}\n")
        return "".join(lines)

    def _json_line(
        self, event: BinlogEvent, table: TableMap | None, changes: list[RowChange] | None
    ) -> str:
        obj = object_text(event_json(event, table))
        if changes is None or not isinstance(event.payload, RowsEvent):
            return obj + "\n"
        rows = []
        for before, after in changes:
            assert table is not None  # changes are decoded with the event's table
            if before is None:
                rows.append("{}" if after is None else f'{{"after": {self._row(after, table)}}}')
            elif after is None:
                rows.append(f'{{"before": {self._row(before, table)}}}')
            else:
                rows.append(
                    f'{{"before": {self._row(before, table)}, "after": {self._row(after, table)}}}'
                )
        return f'{obj[:-1]}, "rows": [{", ".join(rows)}]}}\n'

    def _row(self, row: Row, table: TableMap) -> str:
        return self.formats.of(table, len(row)).text(row)
