"""The receiver's half of source facts: what it asks the source and writes beside some events.

The relay log must hold everything the applier needs, so that applying it needs no source
(``binlog.source_facts`` has the format and why). ``FactRecorder`` is asked by the receiver for
every TABLE_MAP and QUERY event it appends:

* ``after_table_map``: a TABLE_MAP with columns that may be UUID/INET4/INET6
  (``hints.hint_candidates``) gets ``ColumnHints``: which of them the source's information_schema
  says are, asked once per distinct TABLE_MAP until the next DDL (a DDL may change a column's
  type without changing its TABLE_MAP: ``BINARY(16)`` and ``UUID`` log alike);
* ``before_query``: an ALTER TABLE run in a named or ``SYSTEM`` time zone gets ``ZoneTimes``:
  the local time of the statement's second in that zone, and the UTC instant of every TIMESTAMP
  literal an added column's DEFAULT has, read as the backfill reads it (each fractional
  precision, cut and rounded), as the source converts them.

The source's schema and clock are asked when the event is received, which is as close as any
reader can get to when it was logged: the binlog does not carry these facts. A failure is the
typed ``SourceError`` of the query (``SourceQueries`` without retry): for the receiver a lost
connection like any other, after which it reconnects, recovery drops the partial transaction,
and the facts are asked again with it.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from binlake.binlog.codec import decode_event, encode_event
from binlake.binlog.constants import HEADER_LEN, EventFlag
from binlake.binlog.events import QueryEvent
from binlake.binlog.format import FormatContext
from binlake.binlog.source_facts import ColumnHints, SourceFactsEvent, ZoneTimes
from binlake.binlog.tablemap import TableMap
from binlake.ddl.defaults import StatementContext
from binlake.ddl.literals import NumberLiteral, StringLiteral, TemporalLiteral, parse_default
from binlake.ddl.parse import parse_ddl
from binlake.ddl.statements import AddColumnClause, AlterTable
from binlake.ddl.temporal import MODE_TIME_ROUND_FRACTIONAL, TemporalError, parse_datetime
from binlake.errors import BinlakeError
from binlake.source.hints import hint_candidates
from binlake.source.queries import SourceQueries

#: A zone the event gives as an offset needs no source: ``+05:00``.
_OFFSET = re.compile(r"^\s*[+-]\d{1,2}:\d{2}\s*$")
#: The facts event's header flags: not a source event (artificial), skippable by server tools.
FACT_FLAGS = int(EventFlag.ARTIFICIAL | EventFlag.IGNORABLE)
#: Fractional digits a column may have (the backfill cuts or rounds a literal to its column's).
_FSPS = range(7)
#: Bytes of a TABLE_MAP body before its shape: the table id (6) and flags (2).
_TABLE_ID_BYTES = 8
#: At most this many TABLE_MAP bodies are kept in ``plain_maps`` (the rest go event by event).
_PLAIN_MAPS = 4096


class FactRecorder:
    def __init__(self, queries: SourceQueries) -> None:
        self.queries = queries
        #: A TABLE_MAP's body after its table id, without the event's CRC32 (which differs for
        #: every event) -> its hints (None: no candidate column).
        self._hints: dict[bytes, ColumnHints | None] = {}
        #: Whole TABLE_MAP bodies (table id included, no CRC32) that got no facts event: a
        #: run of transactions may take them without asking
        #: (``RelayLogWriter.append_transactions``).
        self.plain_maps: set[bytes] = set()

    def after_table_map(self, raw: bytes, ctx: FormatContext) -> bytes | None:
        """The facts event to write right after the TABLE_MAP ``raw`` (None: none needed)."""
        key = raw[HEADER_LEN + _TABLE_ID_BYTES : len(raw) - ctx.checksum_len]  # not its CRC
        if key not in self._hints:
            payload = decode_event(raw, ctx, crc_checked=True).payload
            assert isinstance(payload, TableMap)
            self._hints[key] = self._column_hints(payload)
        fact = self._hints[key]
        if fact is None and len(self.plain_maps) < _PLAIN_MAPS:
            self.plain_maps.add(raw[HEADER_LEN : len(raw) - ctx.checksum_len])
        return None if fact is None else _encode(fact, ctx, raw)

    def before_query(self, raw: bytes, ctx: FormatContext) -> bytes | None:
        """The facts event to write right before the QUERY ``raw`` (None: none needed). Any
        statement but a transaction's own (BEGIN, COMMIT...) may be DDL: the hints asked so far
        are forgotten."""
        event = decode_event(raw, ctx, crc_checked=True)
        payload = event.payload
        assert isinstance(payload, QueryEvent)
        if payload.keyword in ("BEGIN", "COMMIT", "ROLLBACK", "XA", "SAVEPOINT"):
            return None
        self._hints.clear()
        self.plain_maps.clear()
        context = StatementContext.of_event(event.header.timestamp, payload)
        zone = context.time.zone
        if zone is None or _OFFSET.match(zone) or payload.keyword != "ALTER":
            return None
        try:
            statement = parse_ddl(payload.database, payload.text)
        except BinlakeError:
            return None  # the applier refuses it with the parser's own error
        if not isinstance(statement, AlterTable):
            return None
        return _encode(self._zone_times(zone, context, statement), ctx, raw)

    def close(self) -> None:
        self.queries.close()

    # ---- asking the source -------------------------------------------------------------------

    def _column_hints(self, table_map: TableMap) -> ColumnHints | None:
        candidates = hint_candidates(table_map)
        if not candidates:
            return None
        rows = self.queries.run(
            [
                (
                    "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS "
                    "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                    (table_map.schema, table_map.table),
                )
            ],
            "reading column types",
        )
        types = {str(name).casefold(): str(kind).lower() for name, kind in rows}
        hints = {}
        for name in candidates.values():
            kind = types.get(name.casefold())
            if kind in ("uuid", "inet4", "inet6"):
                hints[name] = kind
        return ColumnHints(table_map.schema, table_map.table, hints)

    def _zone_times(self, zone: str, context: StatementContext, statement: AlterTable) -> ZoneTimes:
        second = context.time.seconds
        locals_ = sorted(set(_timestamp_literals(statement, context)))
        columns = ["FROM_UNIXTIME(%s)"]
        columns += ["UNIX_TIMESTAMP(CAST(%s AS DATETIME(6)))"] * len(locals_)
        args: list[Any] = [second]
        args += [v.isoformat(sep=" ", timespec="microseconds") for v in locals_]
        rows = self.queries.run(
            [("SET time_zone = %s", (zone,)), (f"SELECT {', '.join(columns)}", tuple(args))],
            "converting a time",
        )
        values = rows[0] if rows else ()
        local_times = {}
        if values and isinstance(values[0], dt.datetime):
            local_times[second] = values[0]
        instants = {}
        for local, value in zip(locals_, values[1:], strict=False):
            if value is not None and Decimal(value) > 0:
                seconds, fraction = divmod(Decimal(value), 1)
                instants[local] = (int(seconds), int(fraction * 1_000_000))
        return ZoneTimes(zone, local_times, instants)


def _timestamp_literals(statement: AlterTable, context: StatementContext) -> Iterator[dt.datetime]:
    """Every local time a TIMESTAMP column's DEFAULT literal may stand for in the backfill."""
    for clause in statement.clauses:
        if not isinstance(clause, AddColumnClause):
            continue
        column = clause.column
        if column.default is None or not column.type_text.upper().startswith("TIMESTAMP"):
            continue
        try:
            literal = parse_default(column.default, sql_mode=context.sql_mode)
        except BinlakeError:
            continue
        if isinstance(literal, TemporalLiteral | StringLiteral | NumberLiteral):
            yield from _readings(literal.text)


def _readings(text: str) -> Iterator[dt.datetime]:
    for fsp in _FSPS:
        for mode in (0, MODE_TIME_ROUND_FRACTIONAL):
            try:
                value = parse_datetime(text, fsp, mode)
            except TemporalError:
                return
            if isinstance(value, dt.datetime):
                yield value


def _encode(fact: ColumnHints | ZoneTimes, ctx: FormatContext, beside: bytes) -> bytes:
    timestamp = int.from_bytes(beside[:4], "little")
    return encode_event(
        SourceFactsEvent(fact), ctx, timestamp=timestamp, server_id=0, log_pos=0, flags=FACT_FLAGS
    )
