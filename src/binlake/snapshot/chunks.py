"""The source side of a snapshot: one chunk of a table, read in its own consistent snapshot.

``ChunkReader.read`` opens ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` (MariaDB gives the
binlog position P it is consistent with, ``SnapshotSession.begin``), reads up to ``limit`` rows
in key order after the previous chunk's last key, and closes the transaction. Every row of the
chunk is thus the table's row at P. The table's shape (information_schema) is read before the
transaction and again after the rows: if it differs, or the server says the table definition
changed under the snapshot (error 1412), the chunk is read again, so a chunk's rows and shape
always belong together. A table that no longer exists gives None.

A lost connection reads the chunk again, in a new snapshot on a new connection, after the
receiver's backoff (``SnapshotSession.retrying``): a chunk never mixes rows of two snapshots.

Values are read with verify's exact expressions (``canonical.source_expression``) and turned
into the values the applier writes (``canonical.source_converter``); the key columns are read a
second time, as they are, to continue after them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from binlake.binlog.names import TableName
from binlake.errors import SnapshotError, SourceError
from binlake.position import SourcePosition
from binlake.source.table_shape import ColumnInfo, read_columns
from binlake.verify.canonical import VerifyColumn, quote_sql, source_expression, source_values
from binlake.verify.source_session import SnapshotSession

#: information_schema DATA_TYPEs binlake reads as MariaDB's own text forms.
HINTED_TYPES = frozenset({"uuid", "inet4", "inet6"})
#: ER_TABLE_DEF_CHANGED: the table was altered after the consistent snapshot began.
_DEF_CHANGED = 1412
_NO_SUCH_TABLE = 1146
_ATTEMPTS = 20


@dataclass(frozen=True)
class Chunk:
    #: The binlog position the rows are consistent with.
    position: SourcePosition
    columns: tuple[ColumnInfo, ...]
    key: tuple[str, ...]
    #: Rows as the applier writes them, one value per column of ``columns``.
    rows: list[list[Any]]
    #: The last row's key values as the server gave them (None: no rows).
    last_key: tuple[Any, ...] | None


class ChunkReader:
    def __init__(self, session: SnapshotSession) -> None:
        self.session = session

    def shape(self, table: TableName) -> tuple[list[ColumnInfo], list[str]]:
        return read_columns(self.session.query, table.database, table.table)

    def estimated_rows(self, table: TableName) -> int:
        rows = self.session.query(
            "SELECT TABLE_ROWS FROM information_schema.TABLES "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (table.database, table.table),
        )
        return int(rows[0][0] or 0) if rows else 0

    def read(
        self,
        table: TableName,
        key: Sequence[str],
        after: tuple[Any, ...] | None,
        limit: int | None,
    ) -> Chunk | None:
        """Up to ``limit`` rows after ``after`` in ``key`` order (all rows when ``key`` is
        empty); None when the table is gone."""
        for _ in range(_ATTEMPTS):
            columns, primary = self.shape(table)
            if not columns:
                return None
            try:
                chunk = self.session.retrying(
                    lambda: self._read_once(table, columns, key, after, limit)  # noqa: B023
                )
            except SourceError as error:
                if error.code == _NO_SUCH_TABLE:
                    return None
                if error.code != _DEF_CHANGED:
                    raise
                continue
            if self.shape(table) == (columns, primary):
                return Chunk(
                    chunk.position, tuple(columns), tuple(primary), chunk.rows, chunk.last_key
                )
        raise SnapshotError(
            f"{table} changed shape during each of {_ATTEMPTS} attempts to read a chunk",
            table=str(table),
            hint="run the snapshot again once the table's DDL has settled",
        )

    def _read_once(
        self,
        table: TableName,
        columns: list[ColumnInfo],
        key: Sequence[str],
        after: tuple[Any, ...] | None,
        limit: int | None,
    ) -> Chunk:
        readers = [reader_column(c) for c in columns]
        sql, args = chunk_query(table, readers, key, after, limit)
        position = self.session.begin()
        try:
            rows: list[list[Any]] = []
            last_key: tuple[Any, ...] | None = None
            width = len(readers)
            for raw in self.session.stream(sql, args):
                rows.append(source_values(readers, raw[:width]))
                last_key = tuple(raw[width:])
        finally:
            self.session.end()
        return Chunk(position, tuple(columns), tuple(key), rows, last_key if key else None)


def reader_column(column: ColumnInfo) -> VerifyColumn:
    """How a source column is read: its DATA_TYPE decides the expression and conversion (the
    lake type is only consulted for DECIMAL beyond Iceberg's precision, read as text)."""
    from binlake.typemap import IcebergType

    kind = column.data_type.lower()
    wide = kind in ("decimal", "numeric") and (column.numeric_precision or 0) > 38
    lake = IcebergType.STRING if wide else IcebergType.DECIMAL
    return VerifyColumn(column.name, lake, column.numeric_scale or 0, kind)


def chunk_query(
    table: TableName,
    readers: Sequence[VerifyColumn],
    key: Sequence[str],
    after: tuple[Any, ...] | None,
    limit: int | None,
) -> tuple[str, list[Any]]:
    """SELECT of one chunk: the columns, then the key columns as they are; rows after
    ``after`` in key order (``k1 > a OR (k1 = a AND k2 > b) ...``, which uses the index)."""
    select = [source_expression(c) for c in readers] + [quote_sql(k) for k in key]
    sql = f"SELECT {', '.join(select)} FROM {quote_sql(table.database)}.{quote_sql(table.table)}"
    args: list[Any] = []
    if key and after is not None:
        terms = []
        for i, column in enumerate(key):
            equal = [f"{quote_sql(k)} = %s" for k in key[:i]]
            terms.append("(" + " AND ".join([*equal, f"{quote_sql(column)} > %s"]) + ")")
            args.extend([*after[:i], after[i]])
        sql += " WHERE " + " OR ".join(terms)
    if key:
        sql += " ORDER BY " + ", ".join(quote_sql(k) for k in key)
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return sql, args
