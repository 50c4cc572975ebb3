"""Which columns of a source table are MariaDB's UUID, INET4 or INET6 types.

The binlog logs those as plain ``BINARY(16)`` / ``BINARY(4)`` columns: only the source's schema
says that the bytes are a UUID or an address, which the design maps to canonical text
(``binlake.binlog.values``, "hints"). The applier asks the source once per table, when it
creates the Iceberg table or evolves it (columns matched by name; a hint is used only where
the TABLE_MAP column has the type's exact shape). Afterwards the Iceberg column comment holds
the source type (``UUID``), so hints are read back from the lake, not asked again: the source's
current schema is never used to decode rows, only to name these three types.

The same connection converts times for ``binlake.ddl.temporal`` (``SourceClock``): the
statement time of an ALTER whose session time zone was ``SYSTEM`` or a named zone, as the local
time the source stored for the rows it had (``FROM_UNIXTIME`` under that ``time_zone``), with
the source's own time zone rules.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import pymysql

from binlake.binlog.constants import ColumnType as T
from binlake.binlog.mariadb_types import HINT_LENGTHS, HINTS
from binlake.binlog.tablemap import TableMap
from binlake.binlog.values import column_spec
from binlake.ddl.temporal import TemporalError
from binlake.source.errmap import map_pymysql_error
from binlake.source.settings import ConnectionSettings, connect_args

#: Column name (case-folded) -> hint ("uuid", "inet4", "inet6").
HintNames = dict[str, str]


def hints_from_comments(source_types: Mapping[str, str]) -> HintNames:
    """Hints from Iceberg column comments (column name -> source type text)."""
    out = {}
    for name, source_type in source_types.items():
        hint = source_type.strip().lower()
        if hint in HINTS:
            out[name.casefold()] = hint
    return out


def hints_for_map(table_map: TableMap, names: Mapping[str, str]) -> dict[int, str]:
    """The hints of ``table_map``'s columns, by index: a named column whose TABLE_MAP column is
    a binary string of the type's length."""
    if table_map.column_names is None or not names:
        return {}
    out = {}
    for index, name in enumerate(table_map.column_names):
        hint = names.get(name.casefold())
        if hint is None:
            continue
        spec = column_spec(table_map, index)
        if spec.type == T.STRING and spec.length == HINT_LENGTHS[hint]:
            out[index] = hint
    return out


class SourceHints:
    """Asks the source's information_schema (one lazy connection, reused)."""

    def __init__(self, settings: ConnectionSettings) -> None:
        self.settings = settings
        self._conn: Any = None

    def for_table(self, source_table: str) -> HintNames:
        database, _, table = source_table.partition(".")
        query = (
            "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s"
        )
        rows = self._query(query, (database, table))
        return {
            str(name).casefold(): str(kind).lower()
            for name, kind in rows
            if str(kind).lower() in HINTS
        }

    # ---- the source's time zones (``binlake.ddl.temporal.SourceClock``) ----------------

    def local_time(self, zone: str, seconds: int, microseconds: int) -> dt.datetime:
        """The local time in ``zone`` (``SYSTEM`` or a named zone) of a UTC instant, as the
        source server converts it."""
        instant = f"{seconds}.{microseconds:06d}"
        rows = self._zoned(zone, "SELECT FROM_UNIXTIME(CAST(%s AS DECIMAL(20,6)))", instant)
        value = rows[0][0] if rows else None
        if not isinstance(value, dt.datetime):
            raise TemporalError(f"the source has no local time for {instant} in {zone}")
        return value

    def utc_instant(self, zone: str, local: dt.datetime) -> tuple[int, int]:
        """(seconds, microseconds) of a local time of ``zone``, as the source converts it."""
        text = local.isoformat(sep=" ", timespec="microseconds")
        rows = self._zoned(zone, "SELECT UNIX_TIMESTAMP(CAST(%s AS DATETIME(6)))", text)
        value = rows[0][0] if rows else None
        if value is None or Decimal(value) <= 0:
            raise TemporalError(f"{text} in {zone} is not a time the source can store")
        seconds, fraction = divmod(Decimal(value), 1)
        return int(seconds), int(fraction * 1_000_000)

    def _zoned(self, zone: str, query: str, value: str) -> list[tuple[Any, ...]]:
        self._query("SET time_zone = %s", (zone,), during="setting a time zone")
        return self._query(query, (value,), during="converting a time")

    def _query(
        self, query: str, args: tuple[str, ...], during: str = "reading column types"
    ) -> list[tuple[Any, ...]]:
        try:
            if self._conn is None:
                self._conn = pymysql.connect(**connect_args(self.settings))
            with self._conn.cursor() as cursor:
                cursor.execute(query, args)
                return list(cursor.fetchall())
        except (pymysql.err.MySQLError, OSError) as exc:
            self.close()
            raise map_pymysql_error(exc, self.settings, during=during) from exc

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(pymysql.err.MySQLError, OSError):
                conn.close()
