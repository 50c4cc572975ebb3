"""The applier: Spark and Iceberg. The only package that imports pyspark (and py4j).

``runtime`` (the Iceberg jars, no pyspark import), ``spark`` (sessions), ``commit`` (statements
whose snapshots carry binlake's position), ``types`` (the type mapping), ``ddl`` (table DDL),
``frames`` (Arrow tables as DataFrames).
"""
