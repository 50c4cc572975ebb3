"""The applier's tables: ``lake`` (``Lake``: each table's schema and applied position, created
from its first TABLE_MAP, altered, committed), ``actions`` (TRUNCATE, DROP and RENAME TABLE as
lake actions), ``warm`` (the session warmed for the first batch), ``maintenance`` (compaction,
manifest rewrite, snapshot expiry, orphan removal of one table)."""
