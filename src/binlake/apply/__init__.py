"""The applier: relay log -> batches -> Iceberg, exactly once per table (``binlake replicate``).

``plan`` (relay groups classified, batches bounded), ``batch_apply`` (one batch committed to
each table it changes; DDL batches), ``accounting`` (the relay-log checkpoint counts),
``applier`` (the loop), ``replicate`` (receiver thread + applier in one process).
"""
