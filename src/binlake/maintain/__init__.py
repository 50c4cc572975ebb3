"""``binlake maintain``: per table, the maintenance its health calls for (compaction of data and
delete files, manifest rewrite, snapshot expiry, orphan-file removal), safe beside a running
``binlake replicate`` (docs/architecture.md, "Maintenance")."""
