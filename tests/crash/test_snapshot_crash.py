"""Snapshots killed (SIGKILL) at every snapshot crash point, then restarted: each copy resumes
after its last committed chunk (the chunks committed before the kill stay in the table's
lineage, none is committed twice), and the tables equal the source (`verify`).

Also the tables changed under a copy: altered between two of its chunks (the copy starts over
with the new shape), and dropped (the copy ends, streaming replays the DROP).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from binlake.config import load_config
from binlake.crashpoints import POINTS
from binlake.lake.commit import current_lineage
from binlake.lake.snapshot_progress import progress_of
from binlake.lake.target import lake_target
from binlake.storage.snapshot_plan import SnapshotPlan
from binlake_dev.sandbox import MariaDBSandbox
from lake_builder import as_table
from replicate_testing import (
    assert_history_is_exactly_once,
    assert_verify_passes,
    config_for,
    describe,
    lake_warehouse,
    module_source,
    refresh,
    replicate_in_process,
    run_binlake,
    run_replicate,
)

pytestmark = pytest.mark.crash

ROWS = 24_000
CHUNK_ROWS = 6_000
#: Case -> the crash points (name:pass) the copy is killed at, one run each, in order; then a
#: restart finishes it. snapshot_after_replace is the re-snapshot's own test. A copy killed
#: before its second commit leaves chunk files no commit references: its restart is killed
#: while deleting them (snapshot_during_cleanup), and the next restart deletes the rest. A copy
#: killed with every chunk committed, before its high position (snapshot_before_high), has its
#: restart killed once it is marked done (snapshot_before_done).
CASES = {
    "snapshot_after_plan": ("snapshot_after_plan:1",),
    "snapshot_before_chunk": ("snapshot_before_chunk:2", "snapshot_during_cleanup:1"),
    "snapshot_after_chunk": ("snapshot_after_chunk:2",),
    "snapshot_before_done": ("snapshot_before_high:1", "snapshot_before_done:1"),
}
KILLED = -9


source = module_source("snapshot-crash-source")


def test_every_snapshot_crash_point_has_a_case() -> None:
    killed = {kill.split(":")[0] for kills in CASES.values() for kill in kills}
    cased = {*killed, "snapshot_after_replace"}
    assert cased == {name for name in POINTS if name.startswith("snapshot_")}


def prepare(tmp_path: Path, source: MariaDBSandbox, spark: object, database: str) -> Path:
    source.execute(f"CREATE DATABASE {database}")
    with source.connect(database) as conn, conn.cursor() as cursor:
        cursor.execute("CREATE TABLE big (id INT PRIMARY KEY, v VARCHAR(20), d DATE)")
        cursor.execute(
            f"INSERT INTO big SELECT seq, CONCAT('r', seq), '2020-01-01' + INTERVAL seq DAY "
            f"FROM seq_1_to_{ROWS}"
        )
        cursor.execute("CREATE TABLE loose (a INT, b TEXT)")
        cursor.execute("INSERT INTO loose SELECT seq MOD 3, 'x' FROM seq_1_to_500")
    return config_for(tmp_path, source, spark, database, snapshot=f"chunk_rows = {CHUNK_ROWS}\n")


def chunk_ids(config_path: Path, spark: object, table: str) -> list[int]:
    """Snapshot ids of the table's chunk commits in its current lineage, oldest first."""
    config = load_config(config_path)
    name = lake_target(config).lake_table(as_table(table))
    try:
        refresh(spark, config)
        lineage = current_lineage(spark, name)  # type: ignore[arg-type]
    except Exception:  # no namespace or table yet
        return []
    return [s.snapshot_id for s in reversed(lineage) if progress_of(s.summary) is not None]


def killed_at(config: Path, crash_point: str) -> None:
    """`binlake replicate --until-caught-up` armed at ``crash_point``: it must die there."""
    killed = run_replicate(config, "--until-caught-up", crash_point=crash_point)
    assert killed.returncode == KILLED, describe(killed)


def finish_and_check(config: Path, spark: object, database: str) -> None:
    replicate_in_process(config, spark)  # the restart (in this process: one Spark less)
    assert_verify_passes(config, spark)
    assert_history_is_exactly_once(config, spark)
    assert SnapshotPlan(load_config(config).state.snapshot_plan_path).read() == {}


def change_after_the_first_chunk(
    tmp_path: Path, source: MariaDBSandbox, spark: object, database: str, *statements: str
) -> None:
    """The copy killed after its first chunk; ``statements`` run on the source; the restart
    finishes, and checks, the copy."""
    config = prepare(tmp_path, source, spark, database)
    killed_at(config, "snapshot_after_chunk:1")
    for statement in statements:
        source.execute(statement)
    finish_and_check(config, spark, database)


@pytest.mark.parametrize("point", sorted(CASES))
def test_a_snapshot_killed_at_a_crash_point_resumes_after_its_last_chunk(
    tmp_path: Path, source: MariaDBSandbox, spark: object, point: str
) -> None:
    database = f"snapcrash_{point.removeprefix('snapshot_')}"
    config = prepare(tmp_path, source, spark, database)
    for kill in CASES[point]:
        killed_at(config, kill)
    before = chunk_ids(config, spark, f"{database}.big")
    source.execute(f"INSERT INTO {database}.big VALUES ({ROWS + 1}, 'after', NULL)")
    finish_and_check(config, spark, database)
    after = chunk_ids(config, spark, f"{database}.big")
    assert after[: len(before)] == before, "the copy started over instead of resuming"
    assert len(after) > len(before) or point == "snapshot_before_done"
    assert not uncommitted_files(config, spark, f"{database}.big")


def uncommitted_files(config_path: Path, spark: object, table: str) -> list[str]:
    """Chunk files of the table's copies (``binlake-copy-*``) that no snapshot references."""
    target = lake_target(load_config(config_path))
    name = target.lake_table(as_table(table))
    rows = spark.sql(f"SELECT file_path FROM {name}.all_data_files").collect()  # type: ignore[attr-defined]
    referenced = {Path(str(row[0]).removeprefix("file:")).name for row in rows}
    folder = lake_warehouse(spark).joinpath(*target.identifier(as_table(table)), "data")
    copies = folder.rglob("binlake-copy-*.parquet")
    return sorted(p.name for p in copies if p.name not in referenced)


def test_a_resnapshot_killed_after_dropping_the_old_table_copies_it_on_restart(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    database = "snapcrash_replace"
    config = prepare(tmp_path, source, spark, database)
    finish_and_check(config, spark, database)
    source.execute(f"UPDATE {database}.big SET v = 'changed' WHERE id <= 10")
    tables = ("--tables", f"{database}.big")
    killed = run_binlake("snapshot", config, *tables, crash_point="snapshot_after_replace:1")
    assert killed.returncode == KILLED, describe(killed)
    assert chunk_ids(config, spark, f"{database}.big") == []  # dropped, not yet copied
    finish_and_check(config, spark, database)


def test_a_table_altered_between_two_chunks_is_copied_again_with_its_new_shape(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    """A column added and the key's own type changed (the committed chunks hold INT keys, the
    source's are BIGINT now, one past INT's range)."""
    database = "snapcrash_alter"
    alter = (
        f"ALTER TABLE {database}.big MODIFY id BIGINT NOT NULL, "
        "ADD COLUMN extra INT NOT NULL DEFAULT 5"
    )
    late = f"INSERT INTO {database}.big VALUES (5000000000, 'late', NULL, 6)"
    change_after_the_first_chunk(tmp_path, source, spark, database, alter, late)


def test_a_table_dropped_during_its_snapshot_ends_the_copy_and_the_rest_replicates(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    database = "snapcrash_drop"
    drop = f"DROP TABLE {database}.big"
    late = f"INSERT INTO {database}.loose VALUES (9, 'late')"
    # The restart's verify: `loose` equal; `big` gone on both.
    change_after_the_first_chunk(tmp_path, source, spark, database, drop, late)
