"""The key index: where each key of a lake table has its live row, kept beside the relay log.

A keyed table's batch deletes the rows it replaces by position (an Iceberg position-delete file:
data file and row number), so no reader pays for equality deletes. The positions come from this
index, one SQLite file per lake table in ``<state dir>/keyindex/``, which names the Iceberg
snapshot it matches (docs/architecture.md, "The key index"; docs/format.md, "Key index files").

Pure (sqlite3, pyarrow): ``encode`` (keys as canonical bytes), ``store`` (one index file:
lookups, one transaction of changes, CRC-checked reads, the rebuild's writer), ``folder`` (the
files of each table, generations, the durable rename of a rebuild). Keeping it true to the table
(catching up with the table's commits, rebuilding it from a read of the table) is the lake's:
``binlake.lake.write.key_positions``.
"""
