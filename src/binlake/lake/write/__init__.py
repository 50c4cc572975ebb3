"""Commits that carry binlake's position: ``commit`` (statements and appends whose snapshot
carries ``binlake.*`` properties), ``applied_tag`` (the tags that keep a position through
snapshot expiry), ``changes`` and ``spill`` (a batch's net change per key), ``row_delta`` and
``delta_files`` (a batch as one Iceberg row delta), ``key_positions``, ``catch_up`` and
``key_reads`` (its position deletes from the key index, kept true to the table), ``keyed``
(a keyed table's batch: row delta or MERGE INTO)."""
