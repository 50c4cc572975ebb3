"""Table lineages through Spark, for catalogs binlake cannot read as files (REST, Hive, Glue...).

The same ``LakeTable`` as ``binlake.lake.iceberg_meta`` gives for the embedded catalog, parsed
the same way (``lineage_of``) from the table metadata the session's catalog loads
(``binlake.lake.commit.table_metadata``).
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from binlake.errors import BinlakeError
from binlake.lake.commit import table_metadata
from binlake.lake.iceberg_meta import LakeTable, lineage_of
from binlake.lake.spark_errors import spark_errors
from binlake.lake.sql import quote
from binlake.lake.table_actions import split_name, table_exists_now
from binlake.lake.target import LakeTarget

#: Reads of a table's lineage while it is being replaced, before its failure is raised.
_REPLACED_READS = 3


def spark_table_lineage(
    spark: SparkSession, target: LakeTarget, identifier: tuple[str, ...]
) -> LakeTable:
    """The table's current lineage, newest first: its metadata as the catalog gives it
    (``commit.table_metadata``, no Spark job), read as the embedded catalog's files are."""
    name = ".".join(quote(p) for p in (target.catalog, *identifier))
    lineage, cut = lineage_of(table_metadata(spark, name))
    return LakeTable(identifier, lineage, cut)


def spark_lake_tables(spark: SparkSession, target: LakeTarget) -> list[LakeTable]:
    """Every table in the catalog's top-level namespaces, with its lineage."""
    catalog = quote(target.catalog)
    with spark_errors(f"SHOW NAMESPACES IN {catalog}"):
        namespaces = [row[0] for row in spark.sql(f"SHOW NAMESPACES IN {catalog}").collect()]
    out = []
    for shown in sorted(namespaces):
        parts = split_name(shown)  # Spark shows `we.ird db` quoted
        if len(parts) != 1:
            continue  # a nested namespace: binlake writes one level only
        namespace = parts[0]
        statement = f"SHOW TABLES IN {catalog}.{quote(namespace)}"
        with spark_errors(statement):
            names = [row["tableName"] for row in spark.sql(statement).collect()]
        out += _lineages(spark, target, namespace, sorted(names))
    return out


def _lineages(
    spark: SparkSession, target: LakeTarget, namespace: str, names: list[str]
) -> list[LakeTable]:
    """The lineages of the tables ``names`` of ``namespace``. A snapshot copy may replace a
    table in its own thread (or another process may) while they are read: a table dropped
    since the listing is left out, as a listing made after the drop would have; a table
    replaced since is read again."""
    out = []
    for name in names:
        identifier = (namespace, name)
        qualified = ".".join(quote(p) for p in (target.catalog, *identifier))
        for attempt in range(_REPLACED_READS):
            try:
                out.append(spark_table_lineage(spark, target, identifier))
                break
            except BinlakeError:
                if not table_exists_now(spark, qualified):
                    break
                if attempt == _REPLACED_READS - 1:
                    raise
    return out


def table_exists(spark: SparkSession, target: LakeTarget, identifier: tuple[str, ...]) -> bool:
    name = ".".join(quote(p) for p in (target.catalog, *identifier))
    with spark_errors(f"tableExists({name})", table=name):
        return bool(spark.catalog.tableExists(name))
