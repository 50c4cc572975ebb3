"""Which columns of a source table are MariaDB's UUID, INET4 or INET6 types.

The binlog logs those as plain ``BINARY(16)`` / ``BINARY(4)`` columns: only the source's schema
says that the bytes are a UUID or an address, which the design maps to canonical text
(``binlake.binlog.values``, "hints"). A TABLE_MAP column can only be one when it is a binary
string of the type's exact length (``hint_candidates``); for a TABLE_MAP with such columns the
receiver asks the source's information_schema when it receives it and records the answer in
the relay log (``source.facts``, ``binlog.source_facts``), and the applier reads it from there
when it creates or evolves the Iceberg table (columns matched by name). Afterwards the Iceberg
column comment holds the source type (``UUID``), so hints are read back from the lake: the
source's schema is never used to decode rows, only to name these three types.

``SourceHints`` asks the source directly: snapshots (which read the source anyway) and the
applier for a relay log written before binlake recorded facts. It also converts times for
``binlake.ddl.temporal`` (``SourceClock``) there: the statement time of an ALTER whose session
time zone was ``SYSTEM`` or a named zone, as the local time the source stored for the rows it
had (``FROM_UNIXTIME`` under that ``time_zone``), with the source's own time zone rules.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from binlake.binlog.constants import ColumnType as T
from binlake.binlog.encodings.mariadb_types import HINT_LENGTHS, HINTS
from binlake.binlog.tablemap import TableMap
from binlake.binlog.values import column_spec
from binlake.config import Config
from binlake.ddl.temporal import TemporalError
from binlake.source.queries import SourceQueries
from binlake.source.reconnect import Notify, ReconnectPolicy
from binlake.source.settings import connection_settings

#: Column name (case-folded) -> hint ("uuid", "inet4", "inet6").
HintNames = dict[str, str]
_CANDIDATE_LENGTHS = frozenset(HINT_LENGTHS.values())


def hints_from_comments(source_types: Mapping[str, str]) -> HintNames:
    """Hints from Iceberg column comments (column name -> source type text)."""
    out = {}
    for name, source_type in source_types.items():
        hint = source_type.strip().lower()
        if hint in HINTS:
            out[name.casefold()] = hint
    return out


def hint_candidates(table_map: TableMap) -> dict[int, str]:
    """The named columns of ``table_map`` that may be UUID/INET4/INET6: index -> name, for the
    binary strings of length 4 or 16 (a TABLE_MAP without names has none: nothing matches)."""
    if table_map.column_names is None:
        return {}
    out = {}
    for index, name in enumerate(table_map.column_names):
        spec = column_spec(table_map, index)
        if spec.type == T.STRING and spec.length in _CANDIDATE_LENGTHS:
            out[index] = name
    return out


def hints_for_map(table_map: TableMap, names: Mapping[str, str]) -> dict[int, str]:
    """The hints of ``table_map``'s columns, by index: a named column whose TABLE_MAP column is
    a binary string of the type's length."""
    if not names:
        return {}
    out = {}
    for index, name in hint_candidates(table_map).items():
        hint = names.get(name.casefold())
        if hint is not None and column_spec(table_map, index).length == HINT_LENGTHS[hint]:
            out[index] = hint
    return out


class SourceHints:
    """Asks the source's information_schema and clock (``SourceQueries``: one lazy connection,
    reconnected with the receiver's backoff when given a policy). The applier only asks when
    the relay log holds no recorded fact (a relay log written before binlake recorded them,
    docs/format.md "Source facts"); snapshots ask for the tables they create."""

    def __init__(self, queries: SourceQueries) -> None:
        self.queries = queries

    def for_table(self, database: str, table: str) -> HintNames:
        query = (
            "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s"
        )
        rows = self.queries.run([(query, (database, table))], "reading column types")
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
        statements = [("SET time_zone = %s", (zone,)), (query, (value,))]
        return self.queries.run(statements, "converting a time")

    def close(self) -> None:
        self.queries.close()


def source_hints(
    config: Config, *, notify: Notify | None = None, stop: threading.Event | None = None
) -> SourceHints:
    """``SourceHints`` on ``[source]``, reconnecting with ``[receiver]``'s backoff."""
    queries = SourceQueries(
        connection_settings(config.source),
        ReconnectPolicy.from_config(config.receiver),
        notify=notify,
        stop=stop,
    )
    return SourceHints(queries)
