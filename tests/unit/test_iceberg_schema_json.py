"""An Iceberg schema's JSON read as the lake schema binlake writes (``lake.schema.iceberg_json``):
what ``read_lake_schema`` makes of a table without a Spark plan."""

from __future__ import annotations

import pytest

from binlake.binlog.names import TableName
from binlake.errors import SparkStatementError
from binlake.lake.schema.iceberg_json import lake_schema_of_json
from binlake.typemap import IcebergType, LakeColumn

T = TableName("shop", "orders")


def _field(i: int, name: str, kind: object, *, required: bool = False, doc: str = "") -> dict:
    out: dict[str, object] = {"id": i, "name": name, "required": required, "type": kind}
    if doc:
        out["doc"] = doc
    return out


def test_every_type_binlake_writes_reads_back_with_nullability_comment_and_key() -> None:
    kinds = ["int", "long", "float", "double", "date", "timestamp", "timestamptz", "string"]
    fields = [_field(1, "id", "long", required=True, doc="BIGINT UNSIGNED")]
    fields += [_field(i + 2, f"c{i}", kind) for i, kind in enumerate(kinds)]
    fields.append(_field(20, "amount", "decimal(10, 2)", doc="DECIMAL(10,2)"))
    fields.append(_field(21, "blob", "binary"))
    schema = lake_schema_of_json(
        {"type": "struct", "fields": fields, "identifier-field-ids": [1]}, T
    )
    assert schema.source_table == T and schema.key == ("id",)
    assert schema.columns[0] == LakeColumn("id", 0, "BIGINT UNSIGNED", IcebergType.LONG, False)
    assert [c.type.iceberg_name for c in schema.columns[1:9]] == kinds
    assert all(c.nullable and c.source_type == "" for c in schema.columns[1:9])
    assert schema.columns[9] == LakeColumn(
        "amount", 9, "DECIMAL(10,2)", IcebergType.DECIMAL, True, 10, 2
    )
    assert schema.columns[10].type is IcebergType.BINARY


def test_a_table_without_identifier_fields_has_no_key() -> None:
    schema = lake_schema_of_json({"fields": [_field(1, "v", "string")]}, T)
    assert schema.key == () and [c.name for c in schema.columns] == ["v"]


@pytest.mark.parametrize(
    "kind", ["uuid", "time", {"type": "list", "element-id": 3, "element": "int"}]
)
def test_a_column_of_a_type_binlake_does_not_write_is_a_typed_error(kind: object) -> None:
    with pytest.raises(SparkStatementError, match="which binlake does not write") as caught:
        lake_schema_of_json({"fields": [_field(1, "odd", kind)]}, T)
    assert caught.value.table == "shop.orders"
