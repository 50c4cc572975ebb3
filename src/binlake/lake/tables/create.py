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

import json
import threading
from collections.abc import Mapping

from pyspark.sql import SparkSession

from binlake.binlog.names import TableName
from binlake.config.layout import TableLayout
from binlake.lake.catalog.target import LakeTarget
from binlake.lake.schema.iceberg_json import lake_schema_of_json, table_json
from binlake.lake.schema.sql import TABLE_PROPERTIES, create_table_statements, quote
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


class TableMaker:
    """Makes the Iceberg tables of one target: each namespace once (tables of one namespace may
    be made on several threads), each table in one catalog call, or with Spark SQL's statements
    where the catalog is not Iceberg's."""

    def __init__(self, spark: SparkSession, target: LakeTarget) -> None:
        self.spark, self.target = spark, target
        self._lock = threading.Lock()
        #: Namespaces this process made sure of.
        self._namespaces: set[str] = set()
        #: Whether the catalog is Iceberg's (None: not looked up yet).
        self._api: bool | None = None

    def forget(self) -> None:
        """Make sure of each namespace again (another process may have dropped it)."""
        with self._lock:
            self._namespaces.clear()

    def make(self, name: str, source: TableName, schema: LakeSchema) -> LakeSchema | None:
        """The Iceberg table ``name`` of ``source`` with ``schema`` and its layout, unless it
        exists; the schema it was made with when made through the catalog's API (else the
        caller reads it from the table)."""
        parts = self.target.identifier(source)
        namespace = ".".join(quote(p) for p in (self.target.catalog, *parts[:-1]))
        with self._lock:
            if namespace not in self._namespaces:
                self._sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}", source)
                self._namespaces.add(namespace)
            if self._api is None:
                self._api = creates_through_api(self.spark, self.target.catalog)
        layout = self.target.layouts.get(source)
        properties = {**TABLE_PROPERTIES, "format-version": str(self.target.format_version)}
        if self._api:
            made = create_table(self.spark, name, schema, layout, properties, str(source))
            return None if made is None else lake_schema_of_json(json.loads(made), source)
        for statement in create_table_statements(name, schema, properties, layout):
            self._sql(statement, source)
        return None

    def _sql(self, statement: str, source: TableName) -> None:
        with spark_errors(statement, str(source)):
            self.spark.sql(statement)


def create_table(
    spark: SparkSession,
    name: str,
    schema: LakeSchema,
    layout: TableLayout | None,
    properties: Mapping[str, str],
    table: str,
) -> str | None:
    """Create the Iceberg table ``name`` (a Spark SQL name ``catalog.namespace.table``) unless
    it exists; the JSON of its schema as created, None when it existed (``table``: for
    messages)."""
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
            made = builder.create()
        except Exception as error:
            if ALREADY_EXISTS in str(error):
                return None
            raise
        return str(iceberg.SchemaParser.toJson(made.schema()))


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
