"""Snapshots: a table's existing rows copied into its Iceberg table, consistent with streaming.

``chunks`` (a chunk of rows read in its own consistent snapshot on the source), ``copier``
(chunks committed with their progress), ``runner`` (the plan carried out), ``command``
(``binlake snapshot``).
"""
