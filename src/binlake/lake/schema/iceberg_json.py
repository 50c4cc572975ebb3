"""Iceberg's own JSON of a table (``SchemaParser``, ``PartitionSpecParser``,
``SortOrderParser``) and binlake's ``LakeSchema``, both ways (pure: no Spark).

Reading a table's schema through Spark (``spark.table(name).schema``) makes Spark analyse a
plan: tens of milliseconds a table, paid for every table a batch touches first. The JSON is one
call on the table the catalog loaded, and says everything binlake needs: each field's name,
type, whether it is required, its doc (the source type binlake wrote as the column comment),
and the identifier fields (the key). The other way, ``table_json`` gives a new table's schema,
partition spec and sort order, for one catalog call that creates it (``lake.tables.create``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from binlake.binlog.names import TableName
from binlake.config.layout import TableLayout
from binlake.errors import SparkStatementError
from binlake.typemap import IcebergType, LakeColumn, LakeSchema

_DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)")
_BY_NAME = {t.iceberg_name: t for t in IcebergType if t is not IcebergType.DECIMAL}


def lake_schema_of_json(schema: Mapping[str, Any], source_table: TableName) -> LakeSchema:
    """The ``LakeSchema`` of an Iceberg schema's JSON (``index``: the column's position in
    Iceberg); a column of a type binlake does not write is a ``SparkStatementError``."""
    fields = list(schema.get("fields") or [])
    keys = {int(i) for i in schema.get("identifier-field-ids") or []}
    columns = tuple(_column(f, i, source_table) for i, f in enumerate(fields))
    key = tuple(str(f["name"]) for f in fields if int(f["id"]) in keys)
    return LakeSchema(source_table, columns, key)


def _column(field: Mapping[str, Any], index: int, source_table: TableName) -> LakeColumn:
    name, kind = str(field["name"]), field.get("type")
    nullable = not bool(field.get("required"))
    comment = str(field.get("doc") or "")
    decimal = _DECIMAL.fullmatch(kind) if isinstance(kind, str) else None
    if decimal is not None:
        precision, scale = int(decimal.group(1)), int(decimal.group(2))
        return LakeColumn(name, index, comment, IcebergType.DECIMAL, nullable, precision, scale)
    lake = _BY_NAME.get(kind) if isinstance(kind, str) else None
    if lake is None:
        shown = str(kind.get("type")) if isinstance(kind, dict) else str(kind)  # nested types
        raise SparkStatementError(
            f"column {name} has type {shown}, which binlake does not write",
            table=str(source_table),
        )
    return LakeColumn(name, index, comment, lake, nullable)


# ---- the other way: a new table's schema, partition spec and sort order as Iceberg's JSON ----

#: Iceberg's transform, and the suffix its Spark-made partition field name takes, of each
#: ``[tables.layout]`` transform (a partition field's name is the column's, then the suffix).
_TRANSFORMS = {
    "identity": ("identity", ""),
    "years": ("year", "_year"),
    "months": ("month", "_month"),
    "days": ("day", "_day"),
    "hours": ("hour", "_hour"),
    "bucket": ("bucket[{width}]", "_bucket"),
    "truncate": ("truncate[{width}]", "_trunc"),
}
#: The first partition field id (Iceberg's ``PARTITION_DATA_ID_START``).
PARTITION_FIELD_START = 1000


@dataclass(frozen=True)
class TableJson:
    """What Iceberg's catalog API takes to create a table: the schema, partition spec and sort
    order, each as Iceberg's JSON text."""

    schema: str
    spec: str
    order: str


def table_json(schema: LakeSchema, layout: TableLayout | None) -> TableJson:
    """The JSON of a new table binlake creates (what ``sql.create_table_statements`` make
    through Spark SQL, in one catalog call): columns with ids 1, 2... in order, the source type
    as each column's doc, the key as identifier fields, the layout's partition fields and sort
    order (their columns named as MariaDB does, case aside: ``TableLayout.check``)."""
    fields = [
        {
            "id": i + 1,
            "name": c.name,
            "required": not c.nullable,
            "type": c.iceberg_type,
            "doc": c.source_type,
        }
        for i, c in enumerate(schema.columns)
    ]
    ids = {c.name.casefold(): i + 1 for i, c in enumerate(schema.columns)}
    names = {c.name.casefold(): c.name for c in schema.columns}
    key = [ids[name.casefold()] for name in schema.key]
    doc = {"type": "struct", "schema-id": 0, "fields": fields, "identifier-field-ids": key}
    partition = layout.partition if layout is not None else ()
    spec_fields = []
    for i, f in enumerate(partition):
        transform, suffix = _TRANSFORMS[f.transform]
        spec_fields.append(
            {
                "name": names[f.column.casefold()] + suffix,
                "transform": transform.format(width=f.width),
                "source-id": ids[f.column.casefold()],
                "field-id": PARTITION_FIELD_START + i,
            }
        )
    sort = layout.sort if layout is not None else ()
    order_fields = [
        {
            "transform": "identity",
            "source-id": ids[f.column.casefold()],
            "direction": "desc" if f.descending else "asc",
            "null-order": _null_order(f.descending, f.nulls_first),
        }
        for f in sort
    ]
    return TableJson(
        json.dumps(doc),
        json.dumps({"spec-id": 0, "fields": spec_fields}),
        json.dumps({"order-id": 1 if order_fields else 0, "fields": order_fields}),
    )


def _null_order(descending: bool, nulls_first: bool | None) -> str:
    """Spark's default: nulls first ascending, last descending."""
    first = (not descending) if nulls_first is None else nulls_first
    return "nulls-first" if first else "nulls-last"
