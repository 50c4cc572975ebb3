"""The lake: Spark and Iceberg. The only package that imports pyspark (and py4j).

Its rooms, lowest first (a room imports from itself or a lower one: ``tests/unit/test_layers.py``):

* ``schema``: Iceberg SQL text and schema plans: quoting, CREATE TABLE, the schema a TABLE_MAP
  gives, schema evolution, ALTER backfills (pure, no Spark);
* ``catalog``: where each table lives (``[target]``, ``[catalog]``), the embedded catalog's
  file, Iceberg metadata and the JDBC catalog read without Spark, catalog failures read from
  Java cause chains, and what binlake writes into a snapshot's summary (no Spark);
* ``spark``: the Spark process: the Iceberg runtime jar, sessions and their configuration, the
  cluster, the Py4J callback server, Spark failures as typed errors, Spark types and frames,
  snapshot chunk jobs, catalog lookups and lineages through the session, ``check-target``;
* ``write``: commits that carry binlake's position: statements and appends with properties,
  row deltas and their files, net changes and their spill, the ``binlake-applied`` tag;
* ``cuts``: consistent cuts: the cuts table and reads at a cut;
* ``tables``: the applier's tables (``Lake``: created, altered, committed), table actions
  (TRUNCATE, DROP, RENAME), the warm start, table maintenance.
"""
