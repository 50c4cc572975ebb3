"""Where each table lives and what its metadata says, read without Spark (``status`` and
``verify`` use it with no session): ``target`` (``[target]``, ``[tables]``, ``[catalog]``),
``embedded`` (the embedded catalog's SQLite file), ``metadata`` (Iceberg metadata files and
lineages), ``jdbc`` (a JDBC catalog on PostgreSQL), ``failures`` (catalog and master failures
read from Java cause chains), ``summary``, ``snapshot_progress`` and ``write_path`` (the
``binlake.*`` properties of a snapshot's summary)."""
