"""The Spark process: ``runtime`` (the repaired Iceberg runtime jar; no pyspark import),
``session`` (settings, start, stop), ``conf`` (the running session's configuration),
``cluster`` (a standalone master), ``callbacks`` (the Py4J callback server), ``errors`` (Spark
failures as typed errors), ``types`` and ``frames`` (the type mapping's Spark half, Arrow as
DataFrames), ``chunk_jobs`` (snapshot chunks on the executors), ``lookup`` and ``lineage`` (a
table and its snapshots as the session's catalog gives them), ``target_check``."""
