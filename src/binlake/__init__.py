"""binlake: exactly-once replication of MySQL/MariaDB into Apache Iceberg."""

from binlake.compiled import choose

__version__ = "0.1.0"

# Compiled hot path or pure Python, once for the process, before any of its modules is imported.
choose()
