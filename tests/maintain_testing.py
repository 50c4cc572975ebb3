"""Shared by the maintenance tests (tests/integration/test_lake_maintenance.py,
tests/crash/test_maintain_crash.py): a tiny mixed workload on a keyed and a keyless table, a
``[maintenance]`` section every threshold of which trips on it, and the snapshots consistent
cuts name (which expiry must keep)."""

from __future__ import annotations

from pathlib import Path

from binlake.config import Config, load_config
from binlake.cuts import Cut, origin_of, protected_snapshots
from binlake.lake.catalog.target import lake_target
from binlake.lake.cuts.table import CUT_TAG_PREFIX, CutsTable
from binlake.lake.spark.lineage import refs, snapshots
from binlake_dev.sandbox import MariaDBSandbox
from lake_targets import TargetSetup, embedded_target
from replicate_testing import config_for, replicate_in_process

#: Every threshold trips on a tiny table; orphans a day old go (Iceberg's floor). No rounds
#: inside ``replicate`` (on by default): these tests run ``binlake maintain`` where they mean it
#: (``scheduled`` turns them on).
MAINTAIN_EVERYTHING = (
    "[maintenance]\n"
    "schedule_s = 0\n"
    "delete_files_per_data_file = 0.0\n"
    "small_files = 2\n"
    "position_delete_files = 1\n"
    "manifests = 2\n"
    "snapshot_max_age_s = 0\n"
    "keep_snapshots = 1\n"
    "orphan_min_age_s = 86400\n"
)


def scheduled(config: Path) -> None:
    """``config`` (``MAINTAIN_EVERYTHING``'s) with rounds inside ``replicate`` back to back: the
    first at the end of its first batch, each next one as the one before ends."""
    text = config.read_text()
    assert "schedule_s = 0\n" in text, text
    config.write_text(text.replace("schedule_s = 0\n", "schedule_s = 0.001\n"))


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


def delete_from_one_file(source: MariaDBSandbox, database: str) -> None:
    """Deletes rows of the keyed table that ``write_changes(.., 0)`` wrote and later changes
    left where they were (not updated nor deleted since): once those sit in one data file (a
    compaction folded the first batches'), a batch of this alone deletes by a position delete
    file scoped to that one file, which makes it mostly deleted (a purge's, ``_ALSO``)."""
    source.execute(f"DELETE FROM {database}.keyed WHERE id < 30 AND id % 3 != 0 AND id % 7 != 0")


def with_maintenance(config: Path, section: str = MAINTAIN_EVERYTHING) -> Path:
    config.write_text(config.read_text() + section)
    return config


#: Thresholds no tiny table trips, per step (orphan removal runs every time).
_NEVER = {
    "compact": "delete_files_per_data_file = 1000000.0\nsmall_files = 10000000\n",
    "deletes": "position_delete_files = 10000000\n",
    "manifests": "manifests = 10000000\n",
    "expire": "keep_snapshots = 10000000\n",
}
_TRIP = {
    "compact": "delete_files_per_data_file = 0.0\nsmall_files = 2\n",
    "deletes": "position_delete_files = 1\n",
    "manifests": "manifests = 2\n",
    "expire": "snapshot_max_age_s = 0\nkeep_snapshots = 1\n",
}


#: The steps a crash point follows that other steps call for: ``prune`` runs after a
#: compaction; ``protect`` (the cut tags) starts every expiry; a purge replaces a compaction
#: whose mostly deleted files hold more live rows than a round's bound.
_RUN_BY = {"prune": "compact", "protect": "expire", "purge": "compact"}
#: What a step needs besides its trigger: every file large and mostly deleted once one of its
#: rows is, a bound of one row a round (a purge of one file).
_ALSO = {"purge": "small_file_bytes = 1\ndelete_ratio = 0.001\ncompaction_max_rows = 1\n"}


def maintaining_only(step: str) -> str:
    """A ``[maintenance]`` section under which ``step`` is the only one to run before orphan
    removal (which always runs); ``prune`` follows a compaction (both run), and so does a
    purge (with no small file, no fold of them before it), ``protect`` is the expiry's first
    part."""
    tripped = _RUN_BY.get(step, step)
    body = "".join(_TRIP[s] if s == tripped else text for s, text in _NEVER.items())
    body += _ALSO.get(step, "")
    return f"[maintenance]\nschedule_s = 0\n{body}orphan_min_age_s = 86400\n"


def replicated_workload(
    source: MariaDBSandbox,
    spark: object,
    folder: Path,
    database: str,
    maintenance: str = "",
    target: TargetSetup | None = None,
) -> Path:
    """``create_tables`` and ``write_changes`` in ``database``, replicated in this process two
    transactions a batch (each table gets several binlake commits) into ``target``'s catalog
    (the embedded one by default; a cluster target's catalog through the session's Spark); its
    config (with the ``maintenance`` section)."""
    create_tables(source, database)
    write_changes(source, database, 0)
    applier = "max_transactions = 2\n"
    into = target or embedded_target()
    config = config_for(folder, source, spark, database, applier=applier, target=into)
    with_maintenance(config, maintenance)
    replicate_in_process(config, spark)
    return config


def cut_snapshots(config: Config, spark: object, identifier: tuple[str, str]) -> set[int]:
    """The table's snapshots the replication's (retained) consistent cuts name."""
    cuts = CutsTable(spark, lake_target(config), config.cuts.identifier).read()  # type: ignore[arg-type]
    origin = origin_of(config)
    return protected_snapshots([c for c in cuts if c.origin == origin], identifier)


def assert_cut_snapshots_tagged(config_path: Path, spark: object, table: str) -> set[int]:
    """Every snapshot of ``table`` (``db.t``) that the retained cuts name is still in the table,
    reads ``VERSION AS OF`` it, and is tagged ``binlake-cut-<id>``; no other snapshot has a cut
    tag. Returns those snapshots."""
    database, _, name = table.partition(".")
    config = load_config(config_path)
    named = cut_snapshots(config, spark, (database, name))
    lake = f"{config.target.catalog}.{table}"
    spark.sql(f"REFRESH TABLE {lake}")  # type: ignore[attr-defined]
    have = set(snapshots(spark, lake))  # type: ignore[arg-type]
    assert named and named <= have, f"{table}: snapshots cuts name {named}, gone {named - have}"
    tags = {t: ref[1] for t, ref in refs(spark, lake).items() if t.startswith(CUT_TAG_PREFIX)}  # type: ignore[arg-type]
    assert tags == {f"{CUT_TAG_PREFIX}{s}": s for s in named}, f"{table}: cut tags {tags}"
    for snapshot in named:
        spark.sql(f"SELECT count(*) FROM {lake} VERSION AS OF {snapshot}").collect()  # type: ignore[attr-defined]
    return named


def recorded_cuts(config: Config, spark: object) -> list[Cut]:
    """The consistent cuts this config's replication recorded (and retains)."""
    cuts = CutsTable(spark, lake_target(config), config.cuts.identifier).read()  # type: ignore[arg-type]
    return [c for c in cuts if c.origin == origin_of(config)]


def flock_waiters(path: Path) -> int:
    """How many processes wait in ``flock`` for ``path`` (Linux's ``/proc/locks``: a blocked
    request is a line with ``->``, naming the file's inode as its last ``:`` part)."""
    inode = path.stat().st_ino
    waiting = 0
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields and fields[-3].rsplit(":", 1)[-1] == str(inode):
            waiting += 1
    return waiting
