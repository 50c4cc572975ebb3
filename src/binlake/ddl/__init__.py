"""MySQL/MariaDB DDL as binlogged QUERY text: parsing, column types and defaults (pure).

``parse`` (``parse_ddl``: CREATE/ALTER/TRUNCATE/DROP/RENAME TABLE, DROP DATABASE), ``tokens``,
``statements`` (the parsed forms), ``types`` (a column type's text -> its Iceberg column),
``literals``, ``defaults`` and ``temporal`` (the value an ADD COLUMN gave existing rows). No
pyspark: this package imports only ``binlake.binlog``, ``binlake.errors`` and
``binlake.typemap``.
"""
