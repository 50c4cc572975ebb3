"""Snapshots killed (SIGKILL) at every snapshot crash point, then restarted: one copy is killed
at each point in turn (each restart recovers from the kill before it and must die at its own
point), resuming after its last committed chunk (the chunks committed before each kill stay in
the table's lineage, none is committed twice); after the last, the tables equal the source
(`verify`). Between two of its kills the table is altered on the source: the copy starts over
with the new shape, and the kills after it resume that copy. The finished copy's re-snapshot is
then killed after dropping the old table.

Also a table dropped under a copy: the copy ends, streaming replays the DROP.

In ``cut`` mode (``make power-cut``) the state folder and the warehouse (``Ground.lake``) are on
the power-cut file system and the power is cut after each kill: a copy's chunk commits are
fsynced only when its table is done, so a cut may make the copy start over; the lineage's
resume checks are the kill mode's, the rest (no key twice, exactly once, equal at the end) both.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from binlake.config import load_config
from binlake.crashpoints import POINTS
from binlake.lake.catalog.snapshot_progress import progress_of
from binlake.lake.catalog.target import lake_target
from binlake.lake.spark.lineage import current_lineage
from binlake.storage.snapshot_plan import SnapshotPlan
from binlake_dev.sandbox import MariaDBSandbox
from cut_modes import CUT, KILL, Ground
from lake_builder import as_table
from lake_targets import TargetSetup
from replicate_testing import (
    assert_history_is_exactly_once,
    assert_verify_passes,
    config_for,
    describe,
    module_source,
    refresh,
    replicate_in_process,
    run_binlake,
    run_replicate,
)

pytestmark = pytest.mark.crash

ROWS = 24_000
CHUNK_ROWS = 6_000
#: Ten chunks of `big` for the copy killed at every point: room for the commits its killed runs
#: make before their points (a commit takes every chunk finished in key order since the last
#: one: one or a few).
LINEAGE_CHUNK_ROWS = 2_400
#: The crash points (name:pass) one copy is killed at, in this order; then a restart finishes it.
#: Killed after its second chunk commit, the table is altered on the source (ALTERED_AFTER); the
#: restart copies it again with its new shape and is killed before its second commit, leaving
#: chunk files no commit references; the next restart is killed while deleting them
#: (snapshot_during_cleanup), the next deletes the rest, resumes the new copy after its first
#: commit, commits the rest and is killed before the high position (snapshot_before_high); the
#: last killed run marks the copy done and dies before the plan forgets it
#: (snapshot_before_done). snapshot_after_replace is the re-snapshot's, at the end of the test.
KILLS = (
    "snapshot_after_plan:1",
    "snapshot_after_chunk:2",
    "snapshot_before_chunk:2",
    "snapshot_during_cleanup:1",
    "snapshot_before_high:1",
    "snapshot_before_done:1",
)
#: After this kill `big` changes shape between two chunks of its copy: a column added and the
#: key's own type changed (the committed chunks hold INT keys, the source's are BIGINT now, a
#: row far past INT's range). The restart copies it again from its start; the new key range
#: puts every row but that one in the new copy's first chunk, so its resumed part is one chunk
#: from its first uncommitted key (which must not read the table whole again).
ALTERED_AFTER = "snapshot_after_chunk:2"
ALTER = (
    "ALTER TABLE {db}.big MODIFY id BIGINT NOT NULL, ADD COLUMN extra INT NOT NULL DEFAULT 5",
    "INSERT INTO {db}.big VALUES (5000000000, 'late', NULL, 6)",
)
KILLED = -9


source = module_source("snapshot-crash-source")


def test_every_snapshot_crash_point_has_a_case() -> None:
    cased = {kill.split(":")[0] for kill in KILLS} | {"snapshot_after_replace"}
    assert cased == {name for name in POINTS if name.startswith("snapshot_")}


def prepare(
    tmp_path: Path,
    source: MariaDBSandbox,
    spark: object,
    database: str,
    chunk_rows: int = CHUNK_ROWS,
    target: TargetSetup | None = None,
) -> Path:
    source.execute(f"CREATE DATABASE {database}")
    with source.connect(database) as conn, conn.cursor() as cursor:
        cursor.execute("CREATE TABLE big (id INT PRIMARY KEY, v VARCHAR(20), d DATE)")
        cursor.execute(
            f"INSERT INTO big SELECT seq, CONCAT('r', seq), '2020-01-01' + INTERVAL seq DAY "
            f"FROM seq_1_to_{ROWS}"
        )
        cursor.execute("CREATE TABLE loose (a INT, b TEXT)")
        cursor.execute("INSERT INTO loose SELECT seq MOD 3, 'x' FROM seq_1_to_500")
    snapshot = f"chunk_rows = {chunk_rows}\ncommit_every_s = 0\n"  # a commit per chunk
    return config_for(tmp_path, source, spark, database, snapshot=snapshot, target=target)


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


def assert_no_key_twice(config_path: Path, spark: object, table: str) -> None:
    """No key of the table is in the lake twice (a chunk's rows committed again would be)."""
    name = lake_target(load_config(config_path)).lake_table(as_table(table))
    query = f"SELECT count(*) AS n, count(DISTINCT id) AS k FROM {name}"
    counts = spark.sql(query).first()  # type: ignore[attr-defined]
    assert counts.n == counts.k, f"{table}: {counts.n} rows, {counts.k} keys"


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


@pytest.mark.parametrize(
    "ground",
    [KILL, pytest.param(CUT, marks=[pytest.mark.powercut, pytest.mark.slow])],
    indirect=True,
)
def test_a_snapshot_killed_at_every_crash_point_in_turn_resumes_after_its_last_chunk(
    ground: Ground, source: MariaDBSandbox, spark: object
) -> None:
    """After each kill the copy's chunk commits before it are still the start of the table's
    lineage (it resumed, it did not start over; but after the ALTER: copied again, none of the
    old chunks kept), no chunk, row or position is committed twice, and a row is inserted on the
    source; the last restart finishes the copy: the lake equals the source (the new shape), the
    plan is empty, no chunk file is left uncommitted. Then a re-snapshot of the finished table,
    killed after dropping the old table, copies it again on restart."""
    database = "snapcrash_lineage_cut" if ground.cutting else "snapcrash_lineage"
    big = f"{database}.big"
    folder = ground.folder("run")
    folder.mkdir()
    config = prepare(folder, source, spark, database, LINEAGE_CHUNK_ROWS, ground.lake(spark))
    ground.settle()
    before: list[int] = []
    for run, kill in enumerate(KILLS, start=1):
        killed_at(config, kill)
        ground.crash(tear=4096)
        now = chunk_ids(config, spark, big)
        # A power cut takes back the chunk commits no fsync covered (a table's copy is fsynced
        # when it is done): the copy may start over then; what is checked below still holds.
        if ground.cutting:
            pass
        elif run > 1 and KILLS[run - 2] == ALTERED_AFTER:
            assert before and not set(now) & set(before), "the altered table was not copied again"
        else:
            assert now[: len(before)] == before, f"started over at {kill}"
        if now:
            assert_no_key_twice(config, spark, big)
        assert_history_is_exactly_once(config, spark)
        source.execute(f"INSERT INTO {big} (id, v) VALUES ({ROWS + run}, 'after kill {run}')")
        if kill == ALTERED_AFTER:
            for statement in ALTER:
                source.execute(statement.format(db=database))
        before = now
    assert ground.cutting or len(before) > 2, before  # the chunks the killed runs committed
    finish_and_check(config, spark, database)
    kept = chunk_ids(config, spark, big)[: len(before)]
    assert ground.cutting or kept == before, "the copy started over"
    assert not uncommitted_files(config, spark, big)
    resnapshot_killed_after_dropping_the_old_table(config, spark, source, database, ground)


def uncommitted_files(config_path: Path, spark: object, table: str) -> list[str]:
    """Chunk files of the table's copies (``binlake-copy-*``) that no snapshot references."""
    target = lake_target(load_config(config_path))
    name = target.lake_table(as_table(table))
    rows = spark.sql(f"SELECT file_path FROM {name}.all_data_files").collect()  # type: ignore[attr-defined]
    referenced = {Path(str(row[0]).removeprefix("file:")).name for row in rows}
    folder = target.warehouse.joinpath(*target.identifier(as_table(table)), "data")
    copies = folder.rglob("binlake-copy-*.parquet")
    return sorted(p.name for p in copies if p.name not in referenced)


def resnapshot_killed_after_dropping_the_old_table(
    config: Path, spark: object, source: MariaDBSandbox, database: str, ground: Ground
) -> None:
    """`binlake snapshot --tables` of a copied table, killed once it dropped the old Iceberg
    table: the restart copies it again."""
    source.execute(f"UPDATE {database}.big SET v = 'changed' WHERE id <= 10")
    tables = ("--tables", f"{database}.big")
    killed = run_binlake("snapshot", config, *tables, crash_point="snapshot_after_replace:1")
    assert killed.returncode == KILLED, describe(killed)
    ground.crash(tear=4096)
    assert chunk_ids(config, spark, f"{database}.big") == []  # dropped, not yet copied
    finish_and_check(config, spark, database)


def test_a_table_dropped_during_its_snapshot_ends_the_copy_and_the_rest_replicates(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    database = "snapcrash_drop"
    drop = f"DROP TABLE {database}.big"
    late = f"INSERT INTO {database}.loose VALUES (9, 'late')"
    # The restart's verify: `loose` equal; `big` gone on both.
    change_after_the_first_chunk(tmp_path, source, spark, database, drop, late)


def test_a_copy_committing_its_chunks_together_killed_around_that_commit_copies_each_key_once(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    """``[snapshot] commit_every_s`` longer than the copy: each table's four chunks go in one
    commit at its end. Killed before that commit (the files written are orphans), then right
    after it (all of a table's chunks in one commit, nothing after it yet): the restart finishes
    the copy with each key once."""
    database = "snapcrash_grouped"
    config = prepare(tmp_path, source, spark, database)
    text = config.read_text()
    grouped = text.replace("commit_every_s = 0\n", "commit_every_s = 3600\n")
    assert grouped != text
    config.write_text(grouped)
    killed_at(config, "snapshot_before_chunk:1")
    assert chunk_ids(config, spark, f"{database}.big") == [], "no commit before the kill"
    killed_at(config, "snapshot_after_chunk:1")
    # The plan copies `big` first: its four chunks are the run's first commit, together.
    assert len(chunk_ids(config, spark, f"{database}.big")) == 1
    assert chunk_ids(config, spark, f"{database}.loose") == [], "killed before loose's copy"
    name = lake_target(load_config(config)).lake_table(as_table(f"{database}.big"))
    assert spark.sql(f"SELECT count(*) FROM {name}").first()[0] == ROWS  # type: ignore[attr-defined]
    assert_no_key_twice(config, spark, f"{database}.big")
    finish_and_check(config, spark, database)
    assert not uncommitted_files(config, spark, f"{database}.big")


SMALL_TABLES = 10
#: A group copy of ten small tables (one Spark job, their commits on four threads) killed: with
#: three members committed and the fourth's commit starting while others run, right after the
#: seventh member's commit, and before the plan forgets the group; each restart copies what is
#: left (a member whose commit landed is "already done", the others copied again).
GROUP_KILLS = ("snapshot_before_chunk:4", "snapshot_after_chunk:7", "snapshot_before_done:1")


def test_a_group_copy_of_small_tables_killed_mid_group_copies_each_table_once(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    database = "snapcrash_group"
    source.execute(f"CREATE DATABASE {database}")
    for t in range(SMALL_TABLES):
        source.execute(f"CREATE TABLE {database}.s{t} (id INT PRIMARY KEY, v VARCHAR(10))")
        source.execute(f"INSERT INTO {database}.s{t} SELECT seq, 'v' FROM {database}.seq_1_to_50")
    config = config_for(
        tmp_path, source, spark, database, snapshot="chunk_rows = 1000\ngroup_threads = 4\n"
    )
    for run, kill in enumerate(GROUP_KILLS):
        killed_at(config, kill)
        assert_history_is_exactly_once(config, spark)
        for t in range(SMALL_TABLES):
            assert_no_key_twice(config, spark, f"{database}.s{t}")
        source.execute(f"INSERT INTO {database}.s{run} VALUES ({1000 + run}, 'late')")
    finish_and_check(config, spark, database)
    for t in range(SMALL_TABLES):
        assert not uncommitted_files(config, spark, f"{database}.s{t}")
