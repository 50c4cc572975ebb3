"""What the driver reads from the source for a copy: the table's shape, its positions, its
chunks and its row estimate (a few small queries; the rows themselves are read by the tasks).

``shape`` reads information_schema (``source.table_shape``): the columns, the primary key, the
TABLE_MAP MariaDB would log for the table, the ``CopyColumn`` of each column, and the column
chunks are split on (the key's first column, and the index that starts with it). Two shapes
compare equal when the table was not altered in between. ``result_shape`` probes the column
definitions of a chunk's SELECT (``LIMIT 0``, read as the tasks read it) for the tasks to check.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from binlake.binlog.names import TableName
from binlake.binlog.tablemap import TableMap
from binlake.position import SourcePosition
from binlake.snapshot.chunk_task import (
    SESSION,
    ChunkSource,
    ColumnShape,
    KeyRange,
    column_shape,
)
from binlake.snapshot.columns import CopyColumn, copy_columns, quote, select_expression
from binlake.snapshot.key_ranges import KeyColumn, RangePlanner, first_index
from binlake.snapshot.positions import flavor_of, high_position, low_position, run_statement
from binlake.snapshot.result_set import TextResultReader
from binlake.source.table_shape import ColumnInfo, read_columns, table_map_from_columns
from binlake.typemap import lake_schema
from binlake.verify.source_session import SnapshotSession

#: information_schema DATA_TYPEs binlake reads as MariaDB's own text forms.
HINTED_TYPES = frozenset({"uuid", "inet4", "inet6"})


@dataclass(frozen=True)
class TableShape:
    database: str
    table: str
    infos: tuple[ColumnInfo, ...]
    #: The primary key's columns (() without one).
    primary: tuple[str, ...]
    #: The key binlake keys the lake table on (``[tables] key_columns``, else the primary key).
    key: tuple[str, ...]
    table_map: TableMap
    columns: tuple[CopyColumn, ...]
    #: The column chunks are split on (None: a table read in one chunk).
    split: KeyColumn | None

    @property
    def name(self) -> str:
        return str(TableName(self.database, self.table))


class SourceReads:
    """The driver's queries of a copy, on one ``SnapshotSession``."""

    def __init__(
        self, session: SnapshotSession, source: ChunkSource, collations: Mapping[str, int]
    ) -> None:
        self.session, self.source, self.collations = session, source, collations
        self.flavor = flavor_of(session.version)

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.session.query(sql, args)

    def shape(self, table: TableName, key_columns: Sequence[str] | None) -> TableShape | None:
        """The table's shape now (None: it does not exist)."""
        database, name = table.database, table.table
        infos, primary = read_columns(self.query, database, name)
        if not infos:
            return None
        tm = table_map_from_columns(database, name, infos, primary, self.collations)
        hints = {
            i: c.data_type.lower()
            for i, c in enumerate(infos)
            if c.data_type.lower() in HINTED_TYPES
        }
        specs = copy_columns(lake_schema(tm, hints), infos)
        key = tuple(key_columns) if key_columns else tuple(primary)
        split = None
        if key:
            first = key[0].casefold()
            kind = next(c.data_type.lower() for c in infos if c.name.casefold() == first)
            split = KeyColumn(key[0], kind, first_index(self.query, database, name, key[0]))
        return TableShape(database, name, tuple(infos), tuple(primary), key, tm, specs, split)

    def estimated_rows(self, table: TableName) -> int:
        database, name = table.database, table.table
        rows = self.query(
            "SELECT TABLE_ROWS FROM information_schema.TABLES "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (database, name),
        )
        return int(rows[0][0] or 0) if rows else 0

    def small_tables(self, tables: Sequence[TableName], most_rows: int) -> set[TableName]:
        """The ``tables`` information_schema estimates at ``most_rows`` rows or fewer (one
        query per database)."""
        by_database: dict[str, set[str]] = {}
        for table in tables:
            by_database.setdefault(table.database, set()).add(table.table)
        small = set()
        for database, names in sorted(by_database.items()):
            rows = self.query(
                "SELECT TABLE_NAME, TABLE_ROWS FROM information_schema.TABLES "
                "WHERE TABLE_SCHEMA = %s AND TABLE_TYPE = 'BASE TABLE'",
                (database,),
            )
            for name, estimate in rows:
                if str(name) in names and int(estimate or 0) <= most_rows:
                    small.add(TableName(database, str(name)))
        return small

    def ranges(
        self, shape: TableShape, *, chunk_rows: int, cores: int, start: Any = None
    ) -> tuple[KeyRange, ...]:
        if shape.split is None:
            return (KeyRange(),)
        planner = RangePlanner(self.query, shape.database, shape.table, shape.split, self.flavor)
        estimate = self.estimated_rows(TableName(shape.database, shape.table))
        return planner.plan(chunk_rows=chunk_rows, estimate=estimate, cores=cores, start=start)

    def low_position(self, table: TableName) -> SourcePosition:
        database, name = table.database, table.table
        return low_position(self.query, self.flavor, database, name)

    def high_position(self) -> SourcePosition:
        return high_position(self.query, self.flavor)

    def result_shape(self, shape: TableShape) -> tuple[ColumnShape, ...]:
        """The column definitions a chunk's SELECT returns now, read as the tasks read them."""
        return self.result_shapes([shape])[0]

    def result_shapes(self, shapes: Sequence[TableShape]) -> list[tuple[ColumnShape, ...]]:
        """``result_shape`` of several tables, on one connection."""
        if not shapes:
            return []
        connection = self.source.connect()
        try:
            run_statement(connection, SESSION, shapes[0].name)
            return [_result_shape(connection, shape) for shape in shapes]
        finally:
            connection.close()


def _result_shape(connection: Any, shape: TableShape) -> tuple[ColumnShape, ...]:
    select = ", ".join(select_expression(c) for c in shape.columns)
    sql = f"SELECT {select} FROM {quote(shape.database)}.{quote(shape.table)} LIMIT 0"
    columns, blocks = TextResultReader(connection, where=shape.name).query(sql)
    for _ in blocks:
        pass
    return tuple(column_shape(c) for c in columns)
