"""One table as the session's catalog sees it: does it exist, its Iceberg ``Table``, a table
property, its schema; Spark SQL multi-part names split into their parts.

A catalog that fails to answer is a typed error (``binlake.lake.spark.errors``: a
``CatalogUnreachableError`` the applier's retry waits out), never a raw Java one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from pyspark.sql import SparkSession

from binlake.binlog.names import TableName
from binlake.lake.schema.iceberg_json import lake_schema_of_json
from binlake.lake.spark.errors import spark_error, spark_errors
from binlake.typemap import LakeSchema


def load_table(spark: SparkSession, name: str) -> Any:
    """The Iceberg ``Table`` of the Spark SQL name ``name`` (current metadata)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, name)


def split_name(table: str) -> list[str]:
    """The parts of a Spark SQL multi-part name (``catalog.ns.table``, backticks allowed)."""
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    i = 0
    while i < len(table):
        char = table[i]
        if char == "`" and quoted and table.startswith("``", i):
            current.append("`")
            i += 1
        elif char == "`":
            quoted = not quoted
        elif char == "." and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
        i += 1
    parts.append("".join(current))
    return parts


def catalog_can_rename(spark: SparkSession, table: str) -> bool:
    """Whether the catalog of ``table`` (its first name part) renames tables: Hadoop catalogs
    do not."""
    catalog = split_name(table)[0]
    prefix = f"spark.sql.catalog.{catalog}"
    kind = spark.conf.get(f"{prefix}.type", None) or ""
    impl = spark.conf.get(f"{prefix}.catalog-impl", None) or ""
    return kind.lower() != "hadoop" and not impl.endswith("HadoopCatalog")


def table_exists(spark: SparkSession, table: str) -> bool:
    """Whether the catalog has ``table``; a catalog that fails to answer is a typed error (a
    ``CatalogUnreachableError`` the applier's retry waits out), never a raw Java one."""
    with spark_errors(f"tableExists({table})", table=table):
        return bool(spark.catalog.tableExists(table))


def table_exists_now(spark: SparkSession, table: str) -> bool:
    """``table_exists`` past the catalog's cache: another process (``binlake snapshot``, or a
    run before a crash) may have dropped or replaced the table since this session loaded it."""
    if not table_exists(spark, table):
        return False
    with spark_errors(f"REFRESH TABLE {table}", table=table):
        spark.sql(f"REFRESH TABLE {table}")
    return table_exists(spark, table)


def table_property(spark: SparkSession, table: str, key: str) -> str | None:
    """The table property ``key`` of ``table``; None when it is not set."""
    with spark_errors(f"read the properties of {table}", table=table):
        value = load_table(spark, table).properties().get(key)
    return None if value is None else str(value)


#: What loading a table the catalog does not have says (Spark's error class, Iceberg's).
NOT_FOUND = ("TABLE_OR_VIEW_NOT_FOUND", "NoSuchTableException")


def lake_schema_if_exists(
    spark: SparkSession, table: str, source_table: TableName
) -> LakeSchema | None:
    """``read_lake_schema``, or None when the catalog has no table ``table``: one load of the
    table where asking first whether it exists loads it twice."""
    try:
        java = load_table(spark, table)
    except Exception as error:  # a missing table is the common case of a new one: no typing
        if any(mark in str(error) for mark in NOT_FOUND) or not table_exists(spark, table):
            return None
        raise spark_error(error, f"read the schema of {table}", str(source_table)) from error
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    with spark_errors(f"read the schema of {table}", table=str(source_table)):
        text = str(jvm.org.apache.iceberg.SchemaParser.toJson(java.schema()))
    return lake_schema_of_json(json.loads(text), source_table)


def read_lake_schema(spark: SparkSession, table: str, source_table: TableName) -> LakeSchema:
    """The schema of the Iceberg table ``table`` (a Spark SQL name) as a ``LakeSchema``:
    Iceberg types, nullability, the source types from the column comments ("" where there is
    none), the identifier fields as the key. ``index`` is the column's position in Iceberg.
    Read from the schema's JSON on the loaded table (``lake_schema_of_json``): no Spark plan."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    with spark_errors(f"read the schema of {table}", table=str(source_table)):
        text = str(jvm.org.apache.iceberg.SchemaParser.toJson(load_table(spark, table).schema()))
    return lake_schema_of_json(json.loads(text), source_table)


def java_items(iterable: Any) -> Iterator[Any]:
    """The items of a Java ``Iterable`` (Py4J handle), one round trip each."""
    iterator = iterable.iterator()
    while iterator.hasNext():
        yield iterator.next()
