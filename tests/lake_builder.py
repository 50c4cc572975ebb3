"""Building the lake side of a replicated table without the applier, for `verify`/`status` tests.

The rows are what binlake would write: the source's own binlog is decoded (``binlake.binlog``),
replayed per primary key up to a source position, and turned into lake values with the design's
type mapping (``binlake.typemap.to_row_values``); the Iceberg table is created with
``binlake.lake.schema.sql`` and each state is committed as one snapshot (INSERT OVERWRITE with the
``binlake.*`` commit properties, the position given). A catalog of its own per test
(``isolated_catalog``) keeps every test's warehouse separate inside the one Spark session.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

from binlake.binlog.errors import BinlogFormatError
from binlake.binlog.names import TableName
from binlake.binlog.rows import ABSENT, RowsEvent, decode_rows
from binlake.binlog.stream import EventStream
from binlake.binlog.tablemap import TableMap
from binlake.lake.catalog.target import LakeTarget, hadoop_catalog_conf
from binlake.lake.schema.evolution import changelog_schema
from binlake.lake.schema.sql import create_table_statements
from binlake.lake.spark.frames import dataframe_from_arrow
from binlake.lake.spark.types import spark_schema
from binlake.lake.write.commit import execute_with_commit_properties
from binlake.position import SourcePosition
from binlake.typemap import LakeSchema, lake_schema, to_row_values
from binlake_dev.sandbox import MariaDBSandbox

HINT_TYPES = ("uuid", "inet4", "inet6")


def master_position(sandbox: MariaDBSandbox) -> SourcePosition:
    ((file, position, *_),) = sandbox.execute("SHOW MASTER STATUS")
    return SourcePosition(str(file), int(position))


def column_hints(sandbox: MariaDBSandbox, table: str) -> dict[int, str]:
    """UUID/INET4/INET6 columns by index: the hints the applier takes from the source schema."""
    database, _, name = table.partition(".")
    rows = sandbox.execute(
        "SELECT ORDINAL_POSITION, DATA_TYPE FROM information_schema.COLUMNS "
        "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
        (database, name),
    )
    return {int(i) - 1: str(t).lower() for i, t in rows if str(t).lower() in HINT_TYPES}


@dataclass
class ReplayedTable:
    """A table's rows replayed from the binlog, by primary key (or in order without one)."""

    table_map: TableMap
    hints: dict[int, str]
    rows: dict[tuple[Any, ...], tuple[Any, ...]] = field(default_factory=dict)
    serial: int = 0
    #: Every row image in source order with its change-log operation (FULL images).
    log: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)

    @property
    def schema(self) -> LakeSchema:
        return lake_schema(self.table_map, self.hints)

    def lake_rows(self) -> list[tuple[Any, ...]]:
        return [to_row_values(r, self.table_map, hints=self.hints) for r in self.rows.values()]

    @property
    def changelog_schema(self) -> LakeSchema:
        return changelog_schema(self.table_map, self.hints)

    def changelog_rows(self, position: SourcePosition) -> list[tuple[Any, ...]]:
        """The change-log rows the applier appends for a table without a key."""
        return [
            (*to_row_values(image, self.table_map, hints=self.hints), op, str(position), seq)
            for seq, (op, image) in enumerate(self.log)
        ]


def replay(
    sandbox: MariaDBSandbox,
    tables: Iterable[str],
    until: SourcePosition | None = None,
) -> dict[str, ReplayedTable]:
    """Every listed table's rows after the binlog events up to ``until`` (default: all)."""
    wanted = set(tables)
    hints = {t: column_hints(sandbox, t) for t in wanted}
    out: dict[str, ReplayedTable] = {}
    for path in sandbox.binlog_files():
        if until is not None and _sequence(path.name) > _sequence(until.file):
            break
        limit = until.offset if until is not None and path.name == until.file else None
        _replay_file(path, wanted, hints, out, limit)
    return out


def _sequence(name: str) -> int:
    return int(name.rsplit(".", 1)[1])


def _replay_file(
    path: Path,
    wanted: set[str],
    hints: dict[str, dict[int, str]],
    out: dict[str, ReplayedTable],
    limit: int | None,
) -> None:
    maps: dict[int, TableMap] = {}
    try:
        for event in EventStream(path.read_bytes()):
            if limit is not None and event.end_offset > limit:
                return
            payload = event.payload
            if isinstance(payload, TableMap):
                maps[payload.table_id] = payload
            elif isinstance(payload, RowsEvent):
                tm = maps[payload.table_id]
                if tm.qualified_name in wanted:
                    _apply(out, tm, hints[tm.qualified_name], payload)
    except BinlogFormatError:
        pass  # the live file's tail


def _apply(
    out: dict[str, ReplayedTable], tm: TableMap, hints: dict[int, str], ev: RowsEvent
) -> None:
    table = out.setdefault(tm.qualified_name, ReplayedTable(tm, hints))
    table.table_map = tm
    for before, after in decode_rows(ev, tm, hints):
        _log(table, before, after)
        previous = None if before is None else table.rows.pop(_find(table, before), None)
        if after is None:
            continue
        if previous is not None:
            after = tuple(p if v is ABSENT else v for v, p in zip(after, previous, strict=True))
        table.serial += 1
        table.rows[_key(tm, after, table.serial)] = after


def _log(table: ReplayedTable, before: Any, after: Any) -> None:
    if before is not None:
        table.log.append(("delete" if after is None else "update_before", before))
    if after is not None:
        table.log.append(("insert" if before is None else "update_after", after))


def _key(tm: TableMap, row: tuple[Any, ...], serial: int) -> tuple[Any, ...]:
    """The primary key; without one, a serial number (rows are a multiset)."""
    return tuple(row[i] for i in tm.primary_key) if tm.primary_key else (serial,)


def _find(table: ReplayedTable, before: tuple[Any, ...]) -> tuple[Any, ...]:
    tm = table.table_map
    if tm.primary_key:
        return tuple(before[i] for i in tm.primary_key)
    for key, row in table.rows.items():
        if all(b is ABSENT or b == r for b, r in zip(before, row, strict=True)):
            return key
    raise AssertionError(f"{tm.qualified_name}: no row {before} to change")


def isolated_catalog(spark: SparkSession, warehouse: Path) -> LakeTarget:
    """A Hadoop catalog of its own in ``warehouse``, registered in the running session with
    the keys binlake's own sessions give one (``hadoop_catalog_conf``: no table cache, so a
    reader thread asking for a snapshot another thread is committing finds it)."""
    name = f"c{uuid.uuid4().hex[:10]}"
    for key, value in hadoop_catalog_conf(name, warehouse).items():
        spark.conf.set(key, value)
    warehouse.mkdir(parents=True, exist_ok=True)
    return LakeTarget(warehouse=warehouse, catalog=name)


def properties(position: SourcePosition, batch: int = 1) -> dict[str, str]:
    return {
        "binlake.position": str(position),
        "binlake.gtid": f"0-1-{batch}",
        "binlake.relay": "relay-bin.000001:4",
        "binlake.batch": str(batch),
    }


def as_table(table: str | TableName) -> TableName:
    """A table given as ``db.table`` text (plain names) or as a pair."""
    return table if isinstance(table, TableName) else TableName.parse(table)


def create_lake_table(
    spark: SparkSession, target: LakeTarget, table: str | TableName, schema: LakeSchema
) -> str:
    name = target.lake_table(as_table(table))
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {name.rsplit('.', 1)[0]}")
    for statement in create_table_statements(name, schema):
        spark.sql(statement)
    return name


def commit_state(
    spark: SparkSession,
    target: LakeTarget,
    table: str,
    replayed: ReplayedTable,
    position: SourcePosition,
    batch: int = 1,
) -> str:
    """Create the table if needed and commit ``replayed``'s rows as its whole content, in one
    snapshot whose summary says ``position``."""
    schema = replayed.schema
    name = create_lake_table(spark, target, table, schema)
    write_rows(spark, name, schema, replayed.lake_rows(), position, batch)
    return name


def commit_changelog(
    spark: SparkSession,
    target: LakeTarget,
    table: str,
    replayed: ReplayedTable,
    position: SourcePosition,
) -> str:
    """A change-log table (the applier's form of a table without a key) holding every change
    up to ``position``, in one snapshot."""
    schema = replayed.changelog_schema
    name = create_lake_table(spark, target, table, schema)
    write_rows(spark, name, schema, replayed.changelog_rows(position), position)
    return name


def write_rows(
    spark: SparkSession,
    name: str,
    schema: LakeSchema,
    rows: list[tuple[Any, ...]],
    position: SourcePosition,
    batch: int = 1,
    *,
    extra: dict[str, str] | None = None,
) -> None:
    """Commit ``rows`` as the table's whole content, at ``position`` (``extra``: more
    ``binlake.*`` summary properties, e.g. a copy's ``binlake.snapshot`` progress)."""
    arrow_schema = schema.arrow_schema()
    columns = [list(column) for column in zip(*rows, strict=True)] if rows else []
    arrays = [
        pa.array(columns[i] if rows else [], type=arrow_schema.field(i).type)
        for i in range(len(arrow_schema))
    ]
    arrow = pa.Table.from_arrays(arrays, schema=arrow_schema)
    view = f"v_{uuid.uuid4().hex[:10]}"
    dataframe_from_arrow(spark, arrow, spark_schema(schema)).createOrReplaceTempView(view)
    execute_with_commit_properties(
        spark,
        f"INSERT OVERWRITE {name} SELECT * FROM {view}",
        {**properties(position, batch), **(extra or {})},
        name,
    )
    spark.catalog.dropTempView(view)
