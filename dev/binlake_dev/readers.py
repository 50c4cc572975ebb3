"""A table of binlake's embedded warehouse read through another engine, for the tests.

binlake's lake is meant to be read by any Iceberg engine (docs/spark.md, "Reading the lake from
other engines"); the tests read replicated tables three ways (``READERS``) and compare each with
the source, row for row:

* ``spark``: Spark SQL on the tests' own session (its catalog ``lake`` is the embedded catalog
  of the tests' configs), timestamptz selected as ``unix_micros`` (``collect`` would give local
  wall-clock times), as ``binlake verify`` reads it;
* ``pyiceberg``: PyIceberg's ``SqlCatalog`` on the warehouse's ``catalog.sqlite`` (the embedded
  catalog is Iceberg's JDBC catalog there, whose ``iceberg_tables`` rows PyIceberg's SQL catalog
  reads as they are), opened read-only: SQLite's ``mode=ro`` and ``init_catalog_tables`` off, so
  it neither creates nor changes anything; ``table.scan().to_arrow()``;
* ``duckdb``: DuckDB's ``iceberg_scan`` on the table's current metadata file (the catalog row's
  ``metadata_location``), with the ``iceberg`` and ``avro`` extensions loaded from the files the
  PyPI packages ``duckdb-extension-iceberg`` and ``duckdb-extension-avro`` hold, installed by
  their ``duckdb_extensions.import_extension`` (offline: nothing is downloaded, autoinstall and
  autoload are off); timestamptz as ``epoch_us``.

Every reader returns the rows as tuples in the table's column order, each value in one normal
form per Iceberg type (``normal``: int; ``Decimal`` at the column's scale, exactly; float; date;
naive datetime; aware datetime in UTC; str; bytes), a value of any other Python type being an
error, and sorted by ``binlake.verify.canonical.encode``. ``source_rows`` reads a MariaDB table
with ``binlake verify``'s own SELECT expressions and conversions (``binlake.verify.canonical``)
into the same form, so a reader's rows equal the source's exactly when the lake does. A reader
that cannot read a table (PyIceberg refuses equality deletes) raises ``UnreadableTableError``,
which names the reader and the table: a test fails, it is never skipped.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Context, Decimal, Inexact
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from binlake.binlog.names import TableName
from binlake.lake.catalog.metadata import CATALOG_FILE, catalog_rows, load_metadata
from binlake.lake.schema.iceberg_json import lake_schema_of_json
from binlake.lake.schema.sql import table_name
from binlake.lake.spark.runtime import cache_root
from binlake.storage.lock import folder_lock
from binlake.typemap import IcebergType, LakeColumn
from binlake.verify.canonical import (
    VerifyColumn,
    encode,
    lake_expression,
    quote_sql,
    source_expression,
    source_values,
)

READERS = ("spark", "pyiceberg", "duckdb")
Row = tuple[Any, ...]
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
#: Delete files by content (Iceberg's ``content`` of a delete file: 1 position, 2 equality).
DELETE_CONTENT = {1: "position", 2: "equality"}
#: The DuckDB extensions ``iceberg_scan`` needs (``avro`` reads the manifests), in load order.
DUCKDB_EXTENSIONS = ("avro", "iceberg")


@dataclass(frozen=True)
class WarehouseTable:
    """A table of the embedded catalog ``catalog`` in ``warehouse`` (its ``catalog.sqlite``)."""

    warehouse: Path
    catalog: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.catalog}.{self.namespace}.{self.name}"

    @property
    def spark_name(self) -> str:
        """The quoted Spark SQL name (the tests' session names the embedded catalog alike)."""
        return table_name(self.catalog, [self.namespace], self.name)

    def metadata_location(self) -> str:
        """The table's current metadata file, as its catalog row names it."""
        rows = catalog_rows(self.warehouse, self.catalog, (self.namespace, self.name))
        if not rows:
            raise LookupError(f"{self} is not in {self.warehouse / CATALOG_FILE}")
        return rows[0][1]

    def columns(self) -> tuple[LakeColumn, ...]:
        """The columns of the table's current schema, from its metadata file."""
        metadata = load_metadata(local_path(self.metadata_location()))
        current = metadata["current-schema-id"]
        schema = next(s for s in metadata["schemas"] if s["schema-id"] == current)
        source = TableName(self.namespace, self.name)
        return lake_schema_of_json(schema, source).columns


class UnreadableTableError(AssertionError):
    """A reader failed on a table: a test failure naming both, with the engine's message."""

    def __init__(self, reader: str, table: WarehouseTable, cause: BaseException) -> None:
        super().__init__(f"{reader} cannot read {table}: {type(cause).__name__}: {cause}")
        self.reader = reader
        self.table = table
        self.cause = cause


def local_path(location: str) -> Path:
    """A location the embedded catalog wrote: a path, or a ``file:`` URI."""
    if location.startswith("file:"):
        return Path(unquote(urlsplit(location).path))
    return Path(location)


# ---- the normal form ----------------------------------------------------------------------


def _exactly(kind: type | tuple[type, ...], value: Any, column: LakeColumn) -> Any:
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError(f"column {column.name} ({column.iceberg_type}): {value!r} read")
    return value


#: Decimals are brought to the column's scale exactly: trailing zeros may go (Spark's
#: ``collect`` gives -1E-10 at scale 10 as ``-1.00E-10``), a digit that is not zero raises.
_EXACT = Context(prec=200, traps=[Inexact])


def _decimal(value: Any, column: LakeColumn) -> Decimal:
    number = Decimal(_exactly((Decimal, int), value, column))
    return number.quantize(Decimal(1).scaleb(-column.scale), context=_EXACT)


def _date(value: Any, column: LakeColumn) -> dt.date:
    if isinstance(value, dt.datetime):
        raise TypeError(f"column {column.name} (date): {value!r} read")
    day: dt.date = _exactly(dt.date, value, column)
    return day


def _timestamp(value: Any, column: LakeColumn) -> dt.datetime:
    moment: dt.datetime = _exactly(dt.datetime, value, column)
    if moment.tzinfo is not None:
        raise TypeError(f"column {column.name} (timestamp without zone): {value!r} read")
    return moment


def _timestamptz(value: Any, column: LakeColumn) -> dt.datetime:
    """Microseconds since the epoch, or an aware datetime: the instant, in UTC."""
    if isinstance(value, int) and not isinstance(value, bool):
        return EPOCH + dt.timedelta(microseconds=value)
    moment: dt.datetime = _exactly(dt.datetime, value, column)
    if moment.utcoffset() is None:
        raise TypeError(f"column {column.name} (timestamptz): a naive {value!r} read")
    return moment.astimezone(dt.UTC)


def _binary(value: Any, column: LakeColumn) -> bytes:
    return bytes(_exactly((bytes, bytearray, memoryview), value, column))


_NORMAL: dict[IcebergType, Callable[[Any, LakeColumn], Any]] = {
    IcebergType.INT: lambda v, c: _exactly(int, v, c),
    IcebergType.LONG: lambda v, c: _exactly(int, v, c),
    IcebergType.DECIMAL: _decimal,
    IcebergType.FLOAT: lambda v, c: _exactly(float, v, c),
    IcebergType.DOUBLE: lambda v, c: _exactly(float, v, c),
    IcebergType.DATE: _date,
    IcebergType.TIMESTAMP: _timestamp,
    IcebergType.TIMESTAMPTZ: _timestamptz,
    IcebergType.STRING: lambda v, c: _exactly(str, v, c),
    IcebergType.BINARY: _binary,
}


def normal(column: LakeColumn, value: Any) -> Any:
    """``value`` of ``column`` in the normal form (see the module docstring); None stays."""
    return None if value is None else _NORMAL[column.type](value, column)


def normal_rows(columns: Sequence[LakeColumn], rows: Sequence[Sequence[Any]]) -> list[Row]:
    """Every row in the normal form, sorted by the canonical encoding of its values."""
    keyed = [_verify_column(c, "") for c in columns]
    out = [tuple(normal(c, v) for c, v in zip(columns, row, strict=True)) for row in rows]
    return sorted(out, key=lambda row: [encode(c, v) for c, v in zip(keyed, row, strict=True)])


def _verify_column(column: LakeColumn, source_type: str) -> VerifyColumn:
    return VerifyColumn(column.name, column.type, column.scale, source_type)


def differences(reader: str, table: object, got: list[Row], want: list[Row], limit: int = 3) -> str:
    """'' when ``reader`` read the rows the source has; else what differs, briefly (a few
    rows, not two long lists)."""
    if got == want:
        return ""
    have, wanted = set(got), set(want)
    missing = [r for r in want if r not in have]
    extra = [r for r in got if r not in wanted]
    lines = [f"{reader} read {len(got)} rows of {table}, the source has {len(want)}"]
    lines += [f"missing: {r!r}" for r in missing[:limit]]
    lines += [f"extra: {r!r}" for r in extra[:limit]]
    if not missing and not extra:
        lines.append("the same rows, some a different number of times")
    return "\n".join(lines)


# ---- the readers --------------------------------------------------------------------------


def read_rows(reader: str, table: WarehouseTable, spark: Any = None) -> list[Row]:
    """``table``'s rows read through ``reader`` (``READERS``; ``spark``: the session the
    ``spark`` reader uses), in the normal form; ``UnreadableTableError`` when it cannot, an
    ``AssertionError`` naming both when it gives a value in no form of its column's type."""
    columns = table.columns()
    try:
        rows = _READERS[reader](table, columns, spark)
    except Exception as exc:
        raise UnreadableTableError(reader, table, exc) from exc
    try:
        return normal_rows(columns, rows)
    except (TypeError, ArithmeticError) as exc:
        raise AssertionError(f"{reader} read {table}: {exc}") from exc


def _spark_rows(table: WarehouseTable, columns: Sequence[LakeColumn], spark: Any) -> list[Row]:
    if spark is None:
        raise ValueError("the spark reader reads through a Spark session: none was given")
    spark.sql(f"REFRESH TABLE {table.spark_name}")
    select = ", ".join(lake_expression(_verify_column(c, "")) for c in columns)
    return [tuple(r) for r in spark.sql(f"SELECT {select} FROM {table.spark_name}").collect()]


def _pyiceberg_rows(table: WarehouseTable, columns: Sequence[LakeColumn], _spark: Any) -> list[Row]:
    from pyiceberg.catalog.sql import SqlCatalog

    database = (table.warehouse / CATALOG_FILE).absolute()
    catalog = SqlCatalog(
        table.catalog,
        uri=f"sqlite:///file:{database}?mode=ro&uri=true",
        warehouse=table.warehouse.absolute().as_uri(),
        init_catalog_tables="false",
    )
    try:
        iceberg = catalog.load_table((table.namespace, table.name))
        names = tuple(c.name for c in columns)
        arrow = iceberg.scan(selected_fields=names).to_arrow()
    finally:
        catalog.engine.dispose()
    return list(zip(*(arrow.column(name).to_pylist() for name in names), strict=True))


def _duckdb_rows(table: WarehouseTable, columns: Sequence[LakeColumn], _spark: Any) -> list[Row]:
    location = str(local_path(table.metadata_location()))
    select = ", ".join(_duckdb_expression(c) for c in columns)
    statement = f"SELECT {select} FROM iceberg_scan({_sql_text(location)})"
    with _shared_duckdb().cursor() as cursor:
        return [tuple(r) for r in cursor.execute(statement).fetchall()]


@functools.cache
def _shared_duckdb() -> Any:
    """This process's DuckDB (loading the extensions takes about 0.2 s a connection); each
    read takes a cursor of its own. A metadata file is one version of a table, so nothing a
    read sees is stale for the next."""
    return duckdb_connection()


def duckdb_connection() -> Any:
    """An in-memory DuckDB with the ``DUCKDB_EXTENSIONS`` loaded, as their PyPI packages mean
    them to be: ``duckdb_extensions.import_extension`` installs the extension file the package
    ``duckdb-extension-<name>`` holds (``INSTALL '<file>'``, a local copy), then ``LOAD``.
    Their folder is ``<binlake cache>/duckdb`` (not the user's ``~/.duckdb``); autoinstall and
    autoload are off, so nothing is ever fetched from the network."""
    import duckdb
    from duckdb_extensions import import_extension

    folder = cache_root() / "duckdb"
    folder.mkdir(parents=True, exist_ok=True)
    connection = duckdb.connect(
        config={
            "extension_directory": str(folder),
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
        }
    )
    # Two DuckDBs installing into one folder at once collide on its temporary files (an
    # IOException, seen with four processes): the test processes take turns.
    with folder_lock(folder, ".install.lock"):
        for name in DUCKDB_EXTENSIONS:
            import_extension(name, con=connection)
    for name in DUCKDB_EXTENSIONS:
        connection.execute(f"LOAD {name}")
    return connection


def _duckdb_expression(column: LakeColumn) -> str:
    name = '"' + column.name.replace('"', '""') + '"'
    return f"epoch_us({name})" if column.type is IcebergType.TIMESTAMPTZ else name


def _sql_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


_READERS: dict[str, Callable[[WarehouseTable, Sequence[LakeColumn], Any], list[Row]]] = {
    "spark": _spark_rows,
    "pyiceberg": _pyiceberg_rows,
    "duckdb": _duckdb_rows,
}


# ---- the source and the lake's delete files -----------------------------------------------


def source_rows(cursor: Any, database: str, table: str, columns: Sequence[LakeColumn]) -> list[Row]:
    """The source table's rows (a PyMySQL ``cursor`` on it), read and converted as ``binlake
    verify`` reads them (a UTC session), in the normal form of the lake ``columns``."""
    cursor.execute("SET SESSION time_zone = '+00:00'")
    cursor.execute(
        "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS "
        "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
        (database, table),
    )
    types = {str(name).casefold(): str(kind).lower() for name, kind in cursor.fetchall()}
    verified = [_verify_column(c, types[c.name.casefold()]) for c in columns]
    select = ", ".join(source_expression(c) for c in verified)
    cursor.execute(f"SELECT {select} FROM {quote_sql(database)}.{quote_sql(table)}")
    return normal_rows(columns, [source_values(verified, row) for row in cursor.fetchall()])


def delete_files(spark: Any, table: WarehouseTable) -> dict[str, int]:
    """The table's live delete files by kind (``position``, ``equality``), from its
    ``delete_files`` metadata table."""
    spark.sql(f"REFRESH TABLE {table.spark_name}")
    query = f"SELECT content, count(*) AS n FROM {table.spark_name}.delete_files GROUP BY content"
    counts = dict.fromkeys(DELETE_CONTENT.values(), 0)
    for row in spark.sql(query).collect():
        counts[DELETE_CONTENT[int(row["content"])]] = int(row["n"])
    return counts


__all__ = [
    "READERS",
    "UnreadableTableError",
    "WarehouseTable",
    "delete_files",
    "differences",
    "duckdb_connection",
    "normal",
    "normal_rows",
    "read_rows",
    "source_rows",
]
