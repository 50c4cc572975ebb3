"""A new Spark session warmed for the applier's first batch, while the relay log recovers.

A restarted ``binlake replicate`` spends most of the time to its first applied batch in a cold
JVM: starting Spark, then the first Spark SQL statements and the first Iceberg commit, each
loading and compiling classes (docs/benchmarks.md, "Recovery after a crash"). The receiver's
relay-log recovery needs no Spark, so ``binlake replicate`` starts the session beside it
(``binlake.apply.replicate``) and then runs ``warm_up``: what the applier's first batch runs,
once, read-only, on one replicated table (the catalog lookup, its schema, its Iceberg metadata
as a row delta loads it), and a row delta's file staging on a one-row file in a temporary
folder. It runs no Spark job: a row delta needs none (the applier reads the tables' positions
from the metadata files for the embedded catalog), and a first Spark job in a cold JVM costs
seconds that the first batch would not have spent. Nothing is written to the lake. A failure
while warming is no error: the applier meets the same statement again, with its own context,
and reports it there.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from binlake.lake.catalog.metadata import lake_tables
from binlake.lake.catalog.target import LakeTarget
from binlake.lake.spark.lineage import spark_lake_tables
from binlake.lake.spark.lookup import read_lake_schema, table_exists
from binlake.lake.write.row_delta import RowDeltaWriter


def warm_up(spark: SparkSession, target: LakeTarget) -> str:
    """Warm ``spark`` for ``target``'s applier (see the module docstring); what was warmed."""
    done = []
    try:
        deltas = RowDeltaWriter(spark)
        deltas.warm()
        done.append("row-delta writer")
        tables = lake_tables(target, lambda t: spark_lake_tables(spark, t))
        for lineage in tables:
            source = target.source_table(lineage.identifier)
            if source is None or not target.selected(source):
                continue
            name = target.lake_table(source)
            if not table_exists(spark, name):
                continue
            schema = read_lake_schema(spark, name, source)
            if schema.key:
                deltas.open(name, schema.key, str(source))
            done.append(f"table {source}")
            break
    except Exception:  # warming is best effort (see the module docstring)
        done.append("(stopped early)")
    return ", ".join(done) or "nothing"
