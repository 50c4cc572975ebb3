"""The applier: relay log -> batches -> Iceberg, exactly once per table (``binlake replicate``).

``applier`` (the loop: read, apply, commit, stop; ``build_applier`` makes its collaborators),
``reading`` (the relay log read from the checkpoint into batches), ``plan`` (relay groups
classified, batches bounded), ``lake_writes`` (a batch and its cut written under the retry
policy), ``batch_apply`` (one batch committed to each table it changes; DDL batches),
``accounting`` (the relay-log checkpoint counts), ``purge`` (relay files the checkpoint passed),
``stopping`` (when the loop ends), ``copies`` (snapshots beside streaming), ``progress`` (the
tally, metrics and status line), ``replicate`` (receiver thread + applier in one process).
"""
