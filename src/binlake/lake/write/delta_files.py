"""The files of a row delta, pure (pyarrow only): a table's layout from Iceberg's own metadata,
and the batch's rows shaped and written as Parquet that Iceberg reads as its own.

A keyed table's batch becomes, without reading the table (``binlake.lake.write.row_delta`` commits
them):

* one Parquet **data file** per partition (``binlake.lake.write.partitions``: an unpartitioned
  table has one) with every upserted row of it (every column), and
* one Parquet **position-delete file** (``file_path``, ``pos``: Iceberg's reserved field ids,
  sorted by path then position) per partition of the data files it names (a position delete is
  in its data file's spec and partition), naming the rows the batch replaces, as the key index
  found them (``PositionLookup``, ``position_deletes``), or, with ``[applier] deletes =
  "equality"``, one Parquet **equality-delete file** on the key columns, holding the key of
  every deleted row and of every upserted row that may replace an older one.

Iceberg finds a Parquet column by its field id (``PARQUET:field_id`` in the file's schema), not
by its name, so the Arrow schema here is built from the table's current Iceberg schema (JSON,
``SchemaParser.toJson``): a renamed or re-typed column is written as the table now has it.
Values go in with the Arrow types ``binlake.typemap`` gives (``LakeColumn.arrow_type``); they are
cast to the Iceberg column's Arrow type, so a value that does not fit is an ``ApplyError``
naming the column, before any file exists.

Parquet options follow Iceberg's own writer and the table's ``write.parquet.*`` properties
(``write.delete.parquet.*`` override them for delete files): compression codec and level, page
size and row limit, dictionary size, page version, bloom filters per column; decimals of
precision up to 18 stored as INT32/INT64 as Iceberg stores them; a CRC-32 on every page. Row
groups are bounded by rows from ``write.parquet.row-group-size-bytes`` (pyarrow bounds them by
rows, not bytes). A table sort order of identity fields is honoured (the data file is sorted and
says so); any other sort order is not reproduced here, and the file is declared unsorted.

``refusal`` names what keeps a table on MERGE: format version 1, a column type binlake does not
write, a partition transform it does not compute, or, for equality deletes only
(``equality_refusal``), a partitioned spec (an equality delete is scoped to its partition, and a
key's old row may sit in another one).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from binlake.errors import ApplyError, TargetError
from binlake.lake.write.changes import misfit_error
from binlake.lake.write.partitions import FilePartition, PartitionSpec, parse_spec

FIELD_ID = b"PARQUET:field_id"
DEFAULT_ROW_GROUP_BYTES = 128 << 20

_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")
_ARROW_TYPES: dict[str, Callable[[], pa.DataType]] = {
    "boolean": pa.bool_,
    "int": pa.int32,
    "long": pa.int64,
    "float": pa.float32,
    "double": pa.float64,
    "date": pa.date32,
    "timestamp": lambda: pa.timestamp("us"),
    "timestamptz": lambda: pa.timestamp("us", tz="UTC"),
    "string": pa.string,
    "binary": pa.binary,
}


def arrow_type_of(iceberg_type: object) -> pa.DataType | None:
    """The Arrow type Iceberg's Parquet readers take for an Iceberg type (its JSON form), or
    None for a type binlake does not write (nested, uuid, fixed, time, nanosecond times)."""
    if not isinstance(iceberg_type, str):
        return None
    match = _DECIMAL.fullmatch(iceberg_type)
    if match:
        return pa.decimal128(int(match.group(1)), int(match.group(2)))
    factory = _ARROW_TYPES.get(iceberg_type)
    return None if factory is None else factory()


@dataclass(frozen=True)
class IcebergColumn:
    field_id: int
    name: str
    #: Iceberg's type, as its JSON form has it (a string for primitive types).
    type: object
    required: bool

    def arrow_field(self) -> pa.Field:
        arrow = arrow_type_of(self.type)
        if arrow is None:
            raise ValueError(f"column {self.name}: Iceberg type {self.type} has no Arrow type here")
        return pa.field(
            self.name, arrow, nullable=not self.required, metadata={FIELD_ID: str(self.field_id)}
        )


@dataclass(frozen=True)
class DeltaLayout:
    """What a row delta needs of an Iceberg table, read from its current metadata."""

    columns: tuple[IcebergColumn, ...]
    #: The key columns' names, in key order (binlake's key: the Iceberg identifier fields).
    key: tuple[str, ...]
    format_version: int
    #: The current partition spec (no fields: unpartitioned).
    partition: PartitionSpec
    #: (column, ascending) when the sort order is identity fields only, else ().
    sort: tuple[tuple[str, bool], ...]
    properties: Mapping[str, str]
    #: Why the current spec's partitions cannot be computed here (None: they can).
    partition_problem: str | None = None

    @property
    def partitioned(self) -> bool:
        return bool(self.partition.fields) or self.partition_problem is not None

    @property
    def key_field_ids(self) -> tuple[int, ...]:
        by_name = {c.name: c.field_id for c in self.columns}
        return tuple(by_name[name] for name in self.key)

    def arrow_schema(self, names: Sequence[str] | None = None) -> pa.Schema:
        """The Parquet schema for ``names`` (default: every column), field ids attached."""
        by_name = {c.name: c for c in self.columns}
        wanted = names if names is not None else [c.name for c in self.columns]
        return pa.schema([by_name[name].arrow_field() for name in wanted])

    def refusal(self) -> str | None:
        """Why this table must take MERGE rather than a row delta with position deletes (None:
        it need not)."""
        if self.partition_problem is not None:
            return f"binlake does not compute the table's partitions ({self.partition_problem})"
        if self.format_version < 2:
            return f"the table is Iceberg format version {self.format_version} (row deltas need 2)"
        names = {c.name for c in self.columns}
        missing = [name for name in self.key if name not in names]
        if missing:
            return f"the key column(s) {', '.join(missing)} are not in the Iceberg schema"
        return self._file_refusal()

    def equality_refusal(self) -> str | None:
        """Why this table must take MERGE rather than a row delta with equality deletes."""
        if self.partitioned:
            return "the table is partitioned (equality deletes are scoped to one partition)"
        return self.refusal()

    def data_file_refusal(self) -> str | None:
        """Why binlake cannot add data files other writers stored (a snapshot's chunks, each
        written whole by an executor) to this table (None: it can)."""
        if self.partitioned:
            return "the table is partitioned (a snapshot's chunk files are not split by partition)"
        return self._file_refusal()

    def _file_refusal(self) -> str | None:
        if any(key.startswith("encryption.") for key in self.properties):
            return "the table is encrypted (binlake writes plain Parquet files)"
        odd = [c for c in self.columns if arrow_type_of(c.type) is None]
        if odd:
            return (
                f"column {odd[0].name} has an Iceberg type binlake does not write ({odd[0].type})"
            )
        return None


def parse_layout(
    schema_json: str,
    spec_json: str,
    order_json: str,
    properties: Mapping[str, str],
    *,
    format_version: int,
    key: Sequence[str],
) -> DeltaLayout:
    """The layout from Iceberg's JSON forms of a schema, a partition spec and a sort order
    (``SchemaParser``, ``PartitionSpecParser``, ``SortOrderParser``)."""
    schema = json.loads(schema_json)
    columns = tuple(
        IcebergColumn(int(f["id"]), str(f["name"]), f["type"], bool(f["required"]))
        for f in schema["fields"]
    )
    spec = json.loads(spec_json)
    problem = None
    try:
        partition = parse_spec(spec, {c.field_id: (c.name, c.type) for c in columns})
    except ValueError as error:
        partition, problem = PartitionSpec(int(spec.get("spec-id", 0))), str(error)
    return DeltaLayout(
        columns=columns,
        key=tuple(key),
        format_version=format_version,
        partition=partition,
        sort=_identity_sort(json.loads(order_json), {c.field_id: c.name for c in columns}),
        properties=dict(properties),
        partition_problem=problem,
    )


def _identity_sort(
    order: Mapping[str, Any], names: Mapping[int, str]
) -> tuple[tuple[str, bool], ...]:
    out = []
    for item in order.get("fields", []):
        source = names.get(int(item["source-id"]))
        if item.get("transform") != "identity" or source is None:
            return ()
        out.append((source, item.get("direction") == "asc"))
    return tuple(out)


# ---- rows as the table takes them ---------------------------------------------------------------


def fit(rows: pa.Table, layout: DeltaLayout, table: str, *, whole: bool) -> pa.Table:
    """``rows`` (columns named as the table's) cast to the table's Parquet schema, in its column
    order; ``whole``: every column of the table must be there (a data file; a delete file has
    the key columns). A value that does not fit is an ``ApplyError`` naming the column."""
    have = set(rows.column_names)
    known = [c.name for c in layout.columns]
    missing = [name for name in known if name not in have] if whole else []
    foreign = sorted(have - set(known))
    if missing or foreign:
        raise ApplyError(
            f"table {table}: the Iceberg table's columns changed behind binlake "
            f"(missing from the batch: {missing or '-'}; unknown to the table: {foreign or '-'})",
            table=table,
            hint="a restart reads the table's schema again",
        )
    names = [name for name in known if name in have]
    schema = layout.arrow_schema(names)
    columns = []
    for name, field in zip(names, schema, strict=True):
        column = rows.column(name)
        if column.null_count and not field.nullable:
            raise ApplyError(
                f"table {table}: column {name} is NOT NULL in the Iceberg table, and a row "
                "has no value for it",
                table=table,
            )
        try:
            columns.append(column.cast(field.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as error:
            raise misfit_error(table, name, field.type, error) from None
    fitted = pa.Table.from_arrays(columns, schema=schema)
    if layout.sort and fitted.num_rows > 1:
        order = [(name, "ascending" if asc else "descending") for name, asc in layout.sort]
        fitted = fitted.sort_by(order)
    return fitted


def require_unique_keys(keys: pa.Table, table: str) -> None:
    """Refuse key columns holding a key twice: two rows of one key in one commit would both
    stay (an equality delete never removes rows its own commit adds). No key columns (a
    table without a key: its rows are a change log, duplicates are rows): nothing to check."""
    if keys.num_rows < 2 or not keys.column_names:
        return
    distinct = keys.group_by(keys.column_names).aggregate([]).num_rows
    if distinct != keys.num_rows:
        raise ApplyError(
            f"table {table}: the batch's net change holds {keys.num_rows - distinct} key(s) "
            "twice; nothing was written",
            table=table,
            hint="a key the source tells apart that Iceberg does not (report it as a bug)",
        )


# ---- position deletes ---------------------------------------------------------------------------

#: Iceberg's reserved field ids of a position-delete file's columns (spec, "Position Delete Files").
FILE_PATH_FIELD_ID = 2147483546
POS_FIELD_ID = 2147483545


@dataclass(frozen=True)
class NewRows:
    """Upserted rows of one chunk (``fit``, whole) going to one new data file: stored at
    ``location``, in ``partition``, from row ``first_row`` of the file on."""

    location: str
    partition: FilePartition
    rows: pa.Table
    first_row: int


@dataclass(frozen=True)
class PositionDeletes:
    """One position-delete file's rows (``position_deletes``), all naming data files of
    ``partition``, and those data files."""

    partition: FilePartition
    rows: pa.Table
    referenced: tuple[str, ...]


class PositionLookup(Protocol):
    """Where a row delta's position deletes come from (``binlake.lake.write.key_positions``):
    told each staged chunk, it names the rows the batch replaces by (data file, position)."""

    def chunk(self, rows: Sequence[NewRows], deleted: pa.Table | None) -> None:
        """A chunk's upserted rows (by data file) and deleted keys (``fit``, key columns)."""

    def deletes(self) -> list[PositionDeletes]:
        """The position deletes found so far, by the partition of the data files they name."""


def position_delete_schema() -> pa.Schema:
    return pa.schema(
        [
            pa.field("file_path", pa.string(), False, {FIELD_ID: str(FILE_PATH_FIELD_ID)}),
            pa.field("pos", pa.int64(), False, {FIELD_ID: str(POS_FIELD_ID)}),
        ]
    )


def position_deletes(paths: Sequence[str], positions: Sequence[int]) -> pa.Table:
    """A position-delete file's rows, sorted by file path, then position (as the spec asks)."""
    table = pa.Table.from_arrays(
        [pa.array(paths, pa.string()), pa.array(positions, pa.int64())],
        schema=position_delete_schema(),
    )
    return table.sort_by([("file_path", "ascending"), ("pos", "ascending")])


# ---- Parquet ------------------------------------------------------------------------------------


def parquet_options(properties: Mapping[str, str], *, deletes: bool) -> dict[str, Any]:
    """pyarrow ``ParquetWriter`` options for the table's ``write.parquet.*`` properties
    (``write.delete.parquet.*`` first for delete files, as Iceberg's writers read them). A
    property that should be a number and is not is a ``TargetError`` naming it."""

    def key(name: str) -> str:
        if deletes and f"write.delete.parquet.{name}" in properties:
            return f"write.delete.parquet.{name}"
        return f"write.parquet.{name}"

    def prop(name: str, default: str) -> str:
        return properties.get(key(name), default)

    def whole(name: str, default: int) -> int:
        return int(table_number(properties, key(name), default))

    codec = prop("compression-codec", "zstd").lower()
    options: dict[str, Any] = {
        "compression": "none" if codec == "uncompressed" else codec,
        "version": "2.6",
        "store_decimal_as_integer": True,
        "store_schema": False,
        "write_page_checksum": True,
        "write_statistics": True,
        "data_page_size": whole("page-size-bytes", 1 << 20),
        "max_rows_per_page": whole("page-row-limit", 20000),
        "dictionary_pagesize_limit": whole("dict-size-bytes", 2 << 20),
        "data_page_version": "2.0" if prop("page-version", "v1") == "v2" else "1.0",
    }
    if prop("compression-level", ""):
        options["compression_level"] = whole("compression-level", 0)
    bloom = _bloom_filters(properties)
    if bloom:
        options["bloom_filter_options"] = bloom
    return options


def table_number(properties: Mapping[str, str], key: str, default: float) -> float:
    """The table property ``key`` as a number (``default`` without one); a value that is not
    one (a user's ``ALTER TABLE ... SET TBLPROPERTIES``) is a ``TargetError`` naming it."""
    raw = properties.get(key)
    if raw is None:
        return default
    try:
        value = float(raw) if isinstance(default, float) else int(raw)
    except ValueError:
        raise TargetError(
            f"the Iceberg table's property {key} = {raw!r} is not a number",
            hint=f"ALTER TABLE ... SET TBLPROPERTIES ('{key}' = '<a number>'), or UNSET it",
        ) from None
    return value


def _bloom_filters(properties: Mapping[str, str]) -> dict[str, dict[str, float]]:
    prefix = "write.parquet.bloom-filter-enabled.column."
    out = {}
    for key, value in properties.items():
        if key.startswith(prefix) and value.strip().lower() == "true":
            column = key.removeprefix(prefix)
            fpp = table_number(properties, f"write.parquet.bloom-filter-fpp.column.{column}", 0.01)
            out[column] = {"fpp": fpp}
    return out


def row_group_bytes(properties: Mapping[str, str]) -> int:
    """The table's ``write.parquet.row-group-size-bytes`` (Iceberg's default without one)."""
    key = "write.parquet.row-group-size-bytes"
    return int(table_number(properties, key, DEFAULT_ROW_GROUP_BYTES))


def row_group_rows(rows: pa.Table, properties: Mapping[str, str]) -> int:
    """Rows per row group for ``write.parquet.row-group-size-bytes`` (from the rows' Arrow
    size: a first estimate of their Parquet size)."""
    target = row_group_bytes(properties)
    per_row = max(int(rows.nbytes) // max(int(rows.num_rows), 1), 1)
    return max(target // per_row, 1)


def write_parquet(
    rows: pa.Table, path: str, properties: Mapping[str, str], *, deletes: bool
) -> int:
    """Write ``rows`` (already ``fit``) as a Parquet file at ``path``; its size in bytes. The
    file is a staging copy: whoever stores it in the warehouse decides on its durability."""
    staging = ParquetStaging(path, rows.schema, properties, deletes=deletes)
    staging.write(rows)
    return staging.close()


class ParquetStaging:
    """A Parquet file written in chunks (``fit`` tables of one schema): chunks are gathered
    until they fill a row group (``row_group_rows``), so memory holds about one row group."""

    def __init__(
        self, path: str, schema: pa.Schema, properties: Mapping[str, str], *, deletes: bool
    ) -> None:
        self.path = path
        self.properties = properties
        self.rows = 0
        self.chunks = 0
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._writer = pq.ParquetWriter(
            path, schema, **parquet_options(properties, deletes=deletes)
        )

    def write(self, rows: pa.Table) -> None:
        if not rows.num_rows:
            return
        self.rows += rows.num_rows
        self.chunks += 1
        self._pending.append(rows)
        self._pending_rows += rows.num_rows
        if self._pending_rows >= row_group_rows(rows, self.properties):
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            group = pa.concat_tables(self._pending)
            self._pending, self._pending_rows = [], 0
            self._writer.write_table(group, row_group_size=row_group_rows(group, self.properties))

    def close(self) -> int:
        """Finish the file; its size in bytes."""
        self._flush()
        self._writer.close()
        return int(os.path.getsize(self.path))


@dataclass
class DataFileStaging:
    """One new data file of a batch: where it will be stored, its partition, its staging copy."""

    location: str
    partition: FilePartition
    staging: ParquetStaging


class DataStaging:
    """A batch's new data files, one per partition its rows fall in (``partitions``), staged
    in ``folder``; each file's location is chosen (``new_location``) when its partition is first
    met, before its rows are written: the key index records each row's position in it."""

    def __init__(self, folder: str, layout: DeltaLayout, new_location: Callable[[], str]) -> None:
        self.folder = folder
        self.layout = layout
        self.new_location = new_location
        self._files: dict[FilePartition, DataFileStaging] = {}

    def split(self, rows: pa.Table | None) -> list[NewRows]:
        """``rows`` (``fit``, whole) by the data file each goes to, from the row each file is
        at (``write`` them next)."""
        if rows is None:
            return []
        out = []
        for partition, part in self.layout.partition.split(rows):
            file = self._files.get(partition)
            if file is None:
                path = os.path.join(self.folder, f"data-{len(self._files)}.parquet")
                staging = ParquetStaging(
                    path, self.layout.arrow_schema(), self.layout.properties, deletes=False
                )
                file = self._files[partition] = DataFileStaging(
                    self.new_location(), partition, staging
                )
            out.append(NewRows(file.location, partition, part, file.staging.rows))
        return out

    def write(self, new: Sequence[NewRows]) -> None:
        for rows in new:
            self._files[rows.partition].staging.write(rows.rows)

    def files(self) -> Iterator[DataFileStaging]:
        """The files with rows, in the order their partitions were met."""
        return (file for file in self._files.values() if file.staging.rows)
