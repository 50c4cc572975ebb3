"""A new Iceberg table in one call of the catalog's API: schema (key included), partition spec,
sort order and properties in its first metadata version.

What Spark SQL's ``CREATE TABLE``, ``ALTER TABLE ... SET IDENTIFIER FIELDS`` and ``ALTER TABLE
... WRITE ORDERED BY`` make (``binlake.lake.schema.sql.create_table_statements``) in three
metadata versions, each a Spark SQL statement to parse and plan; a copy of hundreds of small
tables paid that for each (docs/benchmarks.md, "Wide and busy"). The table is the same: columns
with ids in order and the source types as their docs, the key as identifier fields, the
layout's partition fields under the names Spark gives them, the same table properties. A table
that exists already is left as it is (``CREATE TABLE IF NOT EXISTS``).
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import SparkSession

from binlake.config.layout import TableLayout
from binlake.lake.schema.iceberg_json import table_json
from binlake.lake.spark.errors import spark_errors
from binlake.lake.spark.lookup import split_name
from binlake.typemap import LakeSchema

ALREADY_EXISTS = "org.apache.iceberg.exceptions.AlreadyExistsException"
#: Spark catalog plugins that hand out their Iceberg catalog (``icebergCatalog()``).
ICEBERG_PLUGINS = frozenset(
    {"org.apache.iceberg.spark.SparkCatalog", "org.apache.iceberg.spark.SparkSessionCatalog"}
)


def creates_through_api(spark: SparkSession, catalog: str) -> bool:
    """Whether the Spark catalog ``catalog`` is Iceberg's (else tables are created with Spark
    SQL statements)."""
    with spark_errors(f"look up the Spark catalog {catalog}"):
        plugin = spark._jsparkSession.sessionState().catalogManager().catalog(catalog)
        return str(plugin.getClass().getName()) in ICEBERG_PLUGINS


def create_table(
    spark: SparkSession,
    name: str,
    schema: LakeSchema,
    layout: TableLayout | None,
    properties: Mapping[str, str],
    table: str,
) -> bool:
    """Create the Iceberg table ``name`` (a Spark SQL name ``catalog.namespace.table``) unless
    it exists; whether it was created (``table``: for messages)."""
    if layout is not None:
        layout.check(c.name for c in schema.columns)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    texts = table_json(schema, layout)
    catalog, *namespace, leaf = split_name(name)
    with spark_errors(f"create the Iceberg table {name}", table):
        iceberg = jvm.org.apache.iceberg
        plugin = spark._jsparkSession.sessionState().catalogManager().catalog(catalog)
        parsed = iceberg.SchemaParser.fromJson(texts.schema)
        identifier = iceberg.catalog.TableIdentifier.of(
            iceberg.catalog.Namespace.of(_java_strings(spark, namespace)), leaf
        )
        builder = (
            plugin.icebergCatalog()
            .buildTable(identifier, parsed)
            .withPartitionSpec(iceberg.PartitionSpecParser.fromJson(parsed, texts.spec))
            .withSortOrder(iceberg.SortOrderParser.fromJson(parsed, texts.order))
        )
        for key, value in {**properties, **_ordered(layout)}.items():
            builder = builder.withProperty(key, value)
        try:
            builder.create()
        except Exception as error:
            if ALREADY_EXISTS in str(error):
                return False
            raise
    return True


def _ordered(layout: TableLayout | None) -> dict[str, str]:
    """What Spark's ``WRITE ORDERED BY`` sets beside the sort order: writes ranged by it."""
    return {"write.distribution-mode": "range"} if layout is not None and layout.sort else {}


def _java_strings(spark: SparkSession, values: list[str]) -> object:
    gateway = spark.sparkContext._gateway
    assert gateway is not None
    out = gateway.new_array(gateway.jvm.java.lang.String, len(values))
    for i, value in enumerate(values):
        out[i] = value
    return out
