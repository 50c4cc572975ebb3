"""Shared by the maintenance tests (tests/integration/test_lake_maintenance.py,
tests/crash/test_maintain_crash.py): a tiny mixed workload on a keyed and a keyless table, and
a ``[maintenance]`` section every threshold of which trips on it."""

from __future__ import annotations

from pathlib import Path

from binlake_dev.sandbox import MariaDBSandbox
from replicate_testing import config_for, replicate_in_process

#: Every threshold trips on a tiny table; orphans a day old go (Iceberg's floor).
MAINTAIN_EVERYTHING = (
    "[maintenance]\n"
    "delete_files_per_data_file = 0.0\n"
    "small_files = 2\n"
    "manifests = 2\n"
    "snapshot_max_age_s = 0\n"
    "keep_snapshots = 1\n"
    "orphan_min_age_s = 86400\n"
)


def create_tables(source: MariaDBSandbox, database: str) -> None:
    source.execute(f"CREATE DATABASE {database}")
    source.execute(f"CREATE TABLE {database}.keyed (id INT PRIMARY KEY, v INT)")
    source.execute(f"CREATE TABLE {database}.keyless (id INT, v INT)")


def write_changes(source: MariaDBSandbox, database: str, start: int) -> None:
    """Inserts, updates and deletes in both tables (the keyless one takes appends)."""
    rows = ", ".join(f"({i}, {i % 5})" for i in range(start, start + 30))
    source.execute(f"INSERT INTO {database}.keyed VALUES {rows}")
    source.execute(f"INSERT INTO {database}.keyless VALUES {rows}")
    source.execute(f"UPDATE {database}.keyed SET v = v + 10 WHERE id % 3 = 0")
    source.execute(f"DELETE FROM {database}.keyed WHERE id % 7 = 0")
    source.execute(f"UPDATE {database}.keyless SET v = v + 10 WHERE id % 4 = 0")
    source.execute(f"DELETE FROM {database}.keyless WHERE id % 9 = 0")


def with_maintenance(config: Path, section: str = MAINTAIN_EVERYTHING) -> Path:
    config.write_text(config.read_text() + section)
    return config


#: Thresholds no tiny table trips, per step (orphan removal runs every time).
_NEVER = {
    "compact": "delete_files_per_data_file = 1000000.0\nsmall_files = 10000000\n",
    "manifests": "manifests = 10000000\n",
    "expire": "keep_snapshots = 10000000\n",
}
_TRIP = {
    "compact": "delete_files_per_data_file = 0.0\nsmall_files = 2\n",
    "manifests": "manifests = 2\n",
    "expire": "snapshot_max_age_s = 0\nkeep_snapshots = 1\n",
}


def maintaining_only(step: str) -> str:
    """A ``[maintenance]`` section under which ``step`` is the only one to run before orphan
    removal (which always runs); ``prune`` follows a compaction (both run)."""
    tripped = "compact" if step == "prune" else step
    body = "".join(_TRIP[s] if s == tripped else text for s, text in _NEVER.items())
    return f"[maintenance]\n{body}orphan_min_age_s = 86400\n"


def replicated_workload(
    source: MariaDBSandbox, spark: object, folder: Path, database: str, maintenance: str = ""
) -> Path:
    """``create_tables`` and ``write_changes`` in ``database``, replicated in this process two
    transactions a batch (each table gets several binlake commits); its config (with the
    ``maintenance`` section)."""
    create_tables(source, database)
    write_changes(source, database, 0)
    config = config_for(folder, source, spark, database, applier="max_transactions = 2\n")
    with_maintenance(config, maintenance)
    replicate_in_process(config, spark)
    return config
