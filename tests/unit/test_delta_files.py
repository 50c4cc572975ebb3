"""The pure half of row deltas: a table's layout from Iceberg's JSON, what keeps a table on MERGE,
rows fitted to the Iceberg schema (field ids, types, NOT NULL), Parquet options from table
properties, the copy bound that decides when a fresh insert needs no delete, and the write
recorded in a commit."""

from __future__ import annotations

import datetime as dt
import json
import re
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from binlake.errors import ApplyError, TargetError
from binlake.lake.catalog.metadata import NEVER, UNKNOWN, copy_bound, exact_at
from binlake.lake.catalog.snapshot_progress import SNAPSHOT, SnapshotProgress
from binlake.lake.catalog.write_path import WRITE, WRITE_REASON, Write, WritePath, write_of
from binlake.lake.schema.sql import TABLE_PROPERTIES
from binlake.lake.write.delta_files import (
    FIELD_ID,
    DeltaLayout,
    fit,
    parquet_options,
    parse_layout,
    require_unique_keys,
    row_group_bytes,
    row_group_rows,
    write_parquet,
)
from binlake.position import SourcePosition

SCHEMA = {
    "type": "struct",
    "schema-id": 3,
    "identifier-field-ids": [1],
    "fields": [
        {"id": 1, "name": "id", "required": True, "type": "long"},
        {"id": 2, "name": "amount", "required": False, "type": "decimal(10, 2)"},
        {"id": 5, "name": "label", "required": False, "type": "string"},
        {"id": 4, "name": "at", "required": False, "type": "timestamptz"},
        {"id": 6, "name": "day", "required": True, "type": "date"},
    ],
}
UNPARTITIONED = {"spec-id": 0, "fields": []}
UNSORTED = {"order-id": 0, "fields": []}


def layout(
    *,
    spec: dict[str, object] = UNPARTITIONED,
    order: dict[str, object] = UNSORTED,
    properties: dict[str, str] | None = None,
    version: int = 2,
    schema: dict[str, object] = SCHEMA,
) -> DeltaLayout:
    return parse_layout(
        json.dumps(schema),
        json.dumps(spec),
        json.dumps(order),
        properties or {},
        format_version=version,
        key=("id",),
    )


def rows(**columns: list[object]) -> pa.Table:
    types = {
        "id": pa.int64(),
        "amount": pa.decimal128(10, 2),
        "label": pa.string(),
        "at": pa.timestamp("us", tz="UTC"),
        "day": pa.date32(),
    }
    return pa.table({name: pa.array(v, types[name]) for name, v in columns.items()})


def test_the_parquet_schema_carries_each_columns_iceberg_field_id() -> None:
    schema = layout().arrow_schema()
    assert schema.names == ["id", "amount", "label", "at", "day"]
    assert [schema.field(n).metadata[FIELD_ID] for n in schema.names] == [
        b"1",
        b"2",
        b"5",
        b"4",
        b"6",
    ]
    assert not schema.field("id").nullable and schema.field("amount").nullable
    assert schema.field("amount").type == pa.decimal128(10, 2)
    assert layout().key_field_ids == (1,)


def test_an_unpartitioned_v2_table_of_written_types_takes_row_deltas() -> None:
    assert layout().refusal() is None


def _field(name: str, transform: str, source: int = 1) -> dict[str, object]:
    return {"name": name, "transform": transform, "source-id": source, "field-id": 1000}


def test_a_partitioned_table_takes_row_deltas_by_position_but_not_by_equality() -> None:
    """A position delete names its row wherever the row is; an equality delete is scoped to
    its partition, and a key's old row may be in another one."""
    partitioned = layout(spec={"spec-id": 2, "fields": [_field("id_bucket", "bucket[4]")]})
    assert partitioned.refusal() is None
    assert partitioned.partition.spec_id == 2
    assert partitioned.partition.fields[0].result_type == "int"
    refusal = partitioned.equality_refusal()
    assert refusal is not None and "partitioned" in refusal
    assert layout().equality_refusal() is None


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            {"spec": {"spec-id": 1, "fields": [_field("id", "zorder")]}},
            "the partition transform zorder",
        ),
        (
            {"spec": {"spec-id": 1, "fields": [_field("amount", "bucket[4]", source=3)]}},
            "partition",
        ),
        ({"version": 1}, "format version 1"),
        ({"properties": {"encryption.key-id": "k"}}, "encrypted"),
        (
            {
                "schema": {
                    **SCHEMA,
                    "fields": [
                        *SCHEMA["fields"],
                        {"id": 9, "name": "u", "required": False, "type": "uuid"},
                    ],
                }
            },
            "column u",
        ),
    ],
)
def test_what_keeps_a_table_on_merge_is_named(change: dict[str, object], reason: str) -> None:
    refusal = layout(**change).refusal()
    assert refusal is not None and reason in refusal


def test_rows_are_fitted_in_the_tables_column_order_with_its_types() -> None:
    table = rows(
        day=[dt.date(2024, 1, 2)],
        id=[7],
        amount=[Decimal("1.50")],
        label=["x"],
        at=[dt.datetime(2024, 1, 2, tzinfo=dt.UTC)],
    )
    fitted = fit(table, layout(), "db.t", whole=True)
    assert fitted.column_names == ["id", "amount", "label", "at", "day"]
    assert fitted.schema.field("id").metadata[FIELD_ID] == b"1"
    assert fitted.to_pylist()[0]["amount"] == Decimal("1.50")


def test_a_null_in_a_required_column_is_refused_before_any_file_exists() -> None:
    table = rows(id=[1], day=[None])
    with pytest.raises(ApplyError, match="day is NOT NULL"):
        fit(table, layout(), "db.t", whole=False)


def test_a_value_the_iceberg_column_cannot_hold_is_a_typed_error() -> None:
    narrow = {**SCHEMA, "fields": [{"id": 1, "name": "id", "required": True, "type": "int"}]}
    with pytest.raises(ApplyError, match="does not fit column id"):
        fit(rows(id=[2**40]), layout(schema=narrow), "db.t", whole=False)


def test_a_data_file_needs_every_column_the_table_has() -> None:
    with pytest.raises(ApplyError, match="missing from the batch: \\['amount'"):
        fit(rows(id=[1], day=[None], label=["x"], at=[None]), layout(), "db.t", whole=True)
    with pytest.raises(ApplyError, match="unknown to the table: \\['other'\\]"):
        fit(pa.table({"id": [1], "other": [2]}), layout(), "db.t", whole=False)


def test_an_identity_sort_order_sorts_the_data_file() -> None:
    order = {
        "order-id": 1,
        "fields": [
            {
                "transform": "identity",
                "source-id": 5,
                "direction": "desc",
                "null-order": "nulls-last",
            }
        ],
    }
    sorted_layout = layout(order=order)
    assert sorted_layout.sort == (("label", False),)
    fitted = fit(rows(id=[1, 2, 3], label=["b", "c", "a"]), sorted_layout, "db.t", whole=False)
    assert fitted.column("label").to_pylist() == ["c", "b", "a"]
    bucketed = {**order, "fields": [{**order["fields"][0], "transform": "bucket[4]"}]}
    assert layout(order=bucketed).sort == ()


def test_a_key_twice_in_one_commit_is_refused() -> None:
    require_unique_keys(pa.table({"id": [1, 2, 3]}), "db.t")
    with pytest.raises(ApplyError, match="1 key"):
        require_unique_keys(pa.table({"id": [1, 2, 1]}), "db.t")
    require_unique_keys(pa.table({"id": [1, 1]}).select([]), "db.log")  # no key: rows only


def test_parquet_options_follow_the_tables_write_properties() -> None:
    properties = {
        "write.parquet.compression-codec": "gzip",
        "write.parquet.compression-level": "5",
        "write.delete.parquet.compression-codec": "uncompressed",
        "write.parquet.page-row-limit": "100",
        "write.parquet.bloom-filter-enabled.column.id": "true",
        "write.parquet.bloom-filter-fpp.column.id": "0.05",
    }
    data = parquet_options(properties, deletes=False)
    assert data["compression"] == "gzip" and data["compression_level"] == 5
    assert data["max_rows_per_page"] == 100
    assert data["bloom_filter_options"] == {"id": {"fpp": 0.05}}
    assert data["store_decimal_as_integer"] and data["write_page_checksum"]
    assert parquet_options(properties, deletes=True)["compression"] == "none"
    assert parquet_options({}, deletes=False)["compression"] == "zstd"


def test_row_groups_are_bounded_by_the_row_group_size_property() -> None:
    table = pa.table({"id": pa.array(range(1000), pa.int64())})
    assert row_group_rows(table, {"write.parquet.row-group-size-bytes": "800"}) == 100


@pytest.mark.parametrize(
    ("properties", "deletes", "key"),
    [
        ({"write.parquet.page-size-bytes": "1MB"}, False, "write.parquet.page-size-bytes"),
        (
            {"write.delete.parquet.compression-level": "high"},
            True,
            "write.delete.parquet.compression-level",
        ),
        (
            {
                "write.parquet.bloom-filter-enabled.column.id": "true",
                "write.parquet.bloom-filter-fpp.column.id": "one percent",
            },
            False,
            "write.parquet.bloom-filter-fpp.column.id",
        ),
    ],
)
def test_a_table_property_that_is_not_a_number_is_a_typed_error_naming_it(
    properties: dict[str, str], deletes: bool, key: str
) -> None:
    with pytest.raises(TargetError) as caught:
        parquet_options(properties, deletes=deletes)
    assert key in str(caught.value) and repr(properties[key]) in str(caught.value)
    assert "SET TBLPROPERTIES" in caught.value.hint and key in caught.value.hint


def test_a_row_group_size_that_is_not_a_number_is_a_typed_error_naming_it() -> None:
    with pytest.raises(TargetError, match=re.escape("write.parquet.row-group-size-bytes = '16M'")):
        row_group_bytes({"write.parquet.row-group-size-bytes": "16M"})


def test_the_row_group_size_is_the_tables_property_or_icebergs_default() -> None:
    assert row_group_bytes({"write.parquet.row-group-size-bytes": "4096"}) == 4096
    assert row_group_bytes({}) == 128 << 20
    assert row_group_bytes(TABLE_PROPERTIES) == 16 << 20  # what binlake creates tables with


def test_the_parquet_file_has_field_ids_and_integer_decimals(
    tmp_path: Path,
) -> None:
    two = rows(id=[1, 2], day=[dt.date(2024, 1, 1)] * 2, amount=[Decimal("2.25")] * 2)
    fitted = fit(two, layout(), "db.t", whole=False)
    path = tmp_path / "f.parquet"
    size = write_parquet(fitted, str(path), {}, deletes=False)
    assert size == path.stat().st_size
    parquet = pq.ParquetFile(path)
    assert parquet.schema_arrow.field("id").metadata[FIELD_ID] == b"1"
    column = parquet.metadata.row_group(0).column(1)
    assert column.physical_type == "INT64" and column.compression == "ZSTD"
    assert pq.read_table(path).column("amount").to_pylist() == [Decimal("2.25")] * 2


P1 = SourcePosition("bin.000001", 400)
P2 = SourcePosition("bin.000001", 900)


def copy(done: bool) -> dict[str, str]:
    progress = SnapshotProgress("c1", (3,), P2, 10, done)
    return {"binlake.position": str(P1), SNAPSHOT: progress.to_json()}


def test_a_table_is_exact_once_its_position_reaches_its_copys_consistent_position() -> None:
    batch = {"binlake.position": str(P2)}
    bound = copy_bound([batch, copy(done=True)], cut=False)
    assert bound == P2
    assert not exact_at(bound, P1)
    assert exact_at(bound, P2) and exact_at(bound, SourcePosition("bin.000002", 4))


def test_a_table_streamed_from_its_start_is_exact_and_a_running_copy_never() -> None:
    assert copy_bound([{"binlake.position": str(P1)}], cut=False) is None
    assert exact_at(None, None) and exact_at(None, P1)
    assert copy_bound([copy(done=False)], cut=False) == NEVER
    assert not exact_at(NEVER, P2)


def test_a_lineage_cut_before_any_copy_is_not_trusted_to_be_exact() -> None:
    bound = copy_bound([{"binlake.position": str(P2)}], cut=True)
    assert bound == UNKNOWN and not exact_at(bound, P2)


def test_a_commit_records_its_write_and_why_merge() -> None:
    merge = Write(WritePath.MERGE, "the table is partitioned")
    assert merge.properties() == {WRITE: "merge", WRITE_REASON: "the table is partitioned"}
    assert write_of(merge.properties()) == merge
    assert write_of(Write(WritePath.ROW_DELTA).properties()) == Write(WritePath.ROW_DELTA)
    assert write_of({"binlake.position": "x"}) is None
    assert write_of({WRITE: "something else"}) is None
    assert merge.describe() == "merge (the table is partitioned)"
