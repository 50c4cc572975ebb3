"""The lake: Spark and Iceberg. The only package that imports pyspark (and py4j).

``runtime`` (the Iceberg jars; no pyspark import), ``session`` and ``spark_errors`` (sessions,
Spark failures as typed errors), ``commit`` (statements whose snapshots carry binlake's
position), ``spark_types`` and ``frames`` (the type mapping's Spark half, Arrow to DataFrames),
``target``, ``catalog`` and ``iceberg_meta`` (where tables live, their snapshot lineage),
``sql``, ``schema``, ``schema_changes`` and ``backfill`` (Iceberg DDL text, schema evolution
plans; pure), ``changes`` (net changes as Arrow tables), ``table_actions`` (TRUNCATE, DROP,
RENAME), ``tables`` (``Lake``/``LakeTable``: a replicated table's schema and position, commits),
``snapshot_progress`` (the ``binlake.snapshot`` commit property).
"""
