"""binlake: exactly-once replication of MySQL/MariaDB into Apache Iceberg."""

__version__ = "0.1.0"
