"""The read-only checks: ``binlake verify`` (source and lake compared at one source position)
and ``binlake status`` (where the source, the relay log and every lake table stand).

``verifier`` (the run), ``plan`` (which Iceberg snapshot holds a table at a position),
``source_session`` (a consistent snapshot on the source), ``canonical`` (values both sides
read the same), ``compare`` (counts, checksums, keys), ``errors``, ``status``.
"""
