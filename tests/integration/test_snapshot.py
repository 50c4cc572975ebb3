"""The initial snapshot and re-snapshots, end to end: real MariaDB, real Spark, real Iceberg.

Every test ends with `binlake verify` (source and lake compared at one source position) and the
exactly-once check of each table's history (chunk commits of a copy never repeat; batches after
it are strictly after its position). The live copy's keyed tables, changed again, are also read
through Spark, PyIceberg and DuckDB (``binlake_dev.readers``) and compared with the source row
for row, with position delete files live (binlake's row deltas and MERGE's, after `binlake
maintain`); so are the type coverage workload's tables after their initial copy.
"""

from __future__ import annotations

import io
import os
import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from binlake.binlog.names import TableName
from binlake.config import load_config
from binlake.console import Console
from binlake.errors import SourceConnectionLostError
from binlake.lake.catalog.snapshot_progress import progress_of
from binlake.lake.catalog.target import lake_target
from binlake.lake.spark.lineage import Snapshot, current_lineage
from binlake.maintain.runner import Maintainer
from binlake.snapshot.cells import as_binary_view, locate
from binlake.snapshot.result_set import TextResultReader
from binlake.storage.snapshot_plan import SnapshotPlan
from binlake_dev.readers import (
    READERS,
    WarehouseTable,
    delete_files,
    differences,
    read_rows,
    source_rows,
)
from binlake_dev.sandbox import MariaDBSandbox
from lake_builder import as_table
from lake_targets import TargetSetup
from maintain_testing import maintaining_only
from replicate_testing import (
    assert_history_is_exactly_once,
    assert_verify_passes,
    config_for,
    lake_warehouse,
    module_source,
    replicate_in_process,
    run_binlake,
    start_replicate,
)
from type_workload import all_tables, run_workload

#: Five chunks of `big`: the copy's shape; its size only makes the test slower.
BIG_ROWS = 50_000
CHUNK_ROWS = 10_000


source = module_source("snapshot-source")


def snapshot_config(
    tmp_path: Path,
    source: MariaDBSandbox,
    spark: object,
    database: str,
    target: TargetSetup | None = None,
    chunk_rows: int = CHUNK_ROWS,
) -> Path:
    # a commit per finished chunk (no pause between commits): the tests count them
    snapshot = f"chunk_rows = {chunk_rows}\ncommit_every_s = 0\n"
    return config_for(tmp_path, source, spark, database, snapshot=snapshot, target=target)


def load_tables(source: MariaDBSandbox, database: str) -> None:
    """A keyed table of BIG_ROWS rows, one with a two-column key, one without a key, one
    empty; loaded before binlake starts, so only a snapshot can bring their rows."""
    source.execute(f"CREATE DATABASE {database}")
    statements = [
        "CREATE TABLE big (id INT PRIMARY KEY, v VARCHAR(40), n DECIMAL(12,2), "
        "at DATETIME(6), u BIGINT UNSIGNED)",
        f"INSERT INTO big SELECT seq, CONCAT('v', seq), seq / 7, "
        f"'2024-01-01' + INTERVAL seq SECOND, seq * 1000003 FROM seq_1_to_{BIG_ROWS}",
        "CREATE TABLE pair (a INT, b VARCHAR(12), w DOUBLE, PRIMARY KEY (a, b))",
        "INSERT INTO pair SELECT seq DIV 100, CONCAT('k', seq MOD 100), seq / 3 "
        "FROM seq_1_to_30000",
        "CREATE TABLE nokey (a INT, b VARCHAR(10))",
        "INSERT INTO nokey SELECT seq MOD 10, 'same' FROM seq_1_to_3000",
        "CREATE TABLE empty (id INT PRIMARY KEY, t TEXT)",
    ]
    with source.connect(database) as conn, conn.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


class Writer(threading.Thread):
    """Random inserts, updates (some moving the key) and deletes until stopped."""

    def __init__(self, source: MariaDBSandbox, database: str) -> None:
        super().__init__(daemon=True)
        self.source, self.database = source, database
        self.stop = threading.Event()
        self.transactions = 0

    def run(self) -> None:
        rng = random.Random(7)
        with self.source.connect(self.database) as conn, conn.cursor() as cursor:
            while not self.stop.is_set():
                key = rng.randrange(1, BIG_ROWS * 2)
                statements = [
                    f"INSERT INTO big VALUES ({BIG_ROWS + key}, 'new', 1.5, NOW(6), 7) "
                    "ON DUPLICATE KEY UPDATE v = 'again'",
                    f"UPDATE big SET v = CONCAT(v, '+'), n = n + 1 WHERE id = {key}",
                    f"DELETE FROM big WHERE id = {rng.randrange(1, BIG_ROWS)}",
                    f"UPDATE big SET id = {BIG_ROWS * 3 + key} WHERE id = {key // 2 + 1}",
                    f"UPDATE pair SET w = w + 1 WHERE a = {key % 300}",
                    f"INSERT INTO nokey VALUES ({key % 10}, 'w')",
                ]
                cursor.execute(rng.choice(statements))
                conn.commit()
                self.transactions += 1


@dataclass(frozen=True)
class LiveCopy:
    """``load_tables``' tables copied by the initial snapshot while a ``Writer`` changed them,
    then what the writer did after the first run streamed: built once for the module."""

    database: str
    config: Path
    #: The first run's output (the copy's progress lines).
    first_output: str
    transactions: int


@pytest.fixture(scope="module")
def live_copy(
    tmp_path_factory: pytest.TempPathFactory, source: MariaDBSandbox, spark: object
) -> LiveCopy:
    database = "snap_live"
    load_tables(source, database)
    folder = tmp_path_factory.mktemp("snap-live")
    config = snapshot_config(folder, source, spark, database)
    writer = Writer(source, database)
    writer.start()
    try:
        first = replicate_in_process(config, spark)
    finally:
        writer.stop.set()
        writer.join()
    replicate_in_process(config, spark)  # streams what the writer did after the first run
    return LiveCopy(database, config, first.output, writer.transactions)


def test_a_snapshot_under_concurrent_writes_then_streaming_equals_the_source(
    live_copy: LiveCopy, spark: object
) -> None:
    database, config = live_copy.database, live_copy.config
    assert live_copy.transactions > 0
    checked = assert_verify_passes(config, spark)
    assert sorted(checked) == [f"{database}.{t}" for t in ("big", "empty", "nokey", "pair")]
    assert_history_is_exactly_once(config, spark)
    assert SnapshotPlan(load_config(config).state.snapshot_plan_path).read() == {}
    chunks = chunk_commits(config, spark, f"{database}.big")
    assert len(chunks) >= BIG_ROWS // CHUNK_ROWS
    assert "snapshot: snap_live.big:" in live_copy.first_output  # progress lines per chunk


# ---- the copied and streamed tables through other readers -------------------------------------

#: One transaction of updates and deletes in both keyed tables: row deltas, whose deletes are
#: position deletes (found in the key index, ``binlake.keyindex``).
FULL_IMAGE_CHANGES = (
    "UPDATE big SET v = CONCAT(v, '~'), n = -n WHERE id % 997 = 1",
    "DELETE FROM big WHERE id % 997 = 2",
    "UPDATE pair SET w = -w WHERE a = 3",
    "DELETE FROM pair WHERE a = 4",
)
#: Fresh keys (past any the writer makes), every column's values far from the copy's: a row
#: delta of one data file that binlake writes itself (pyarrow), with no delete file.
FRESH_ROWS = (
    "INSERT INTO big SELECT seq, CONCAT('fresh ', seq), seq / 3 - 500000, "
    "'2031-05-06 07:08:09.123456' + INTERVAL seq SECOND, 18446744073709551615 - seq "
    "FROM seq_1000001_to_1000300"
)
#: ``pair`` after it was turned to format v3: deletion vectors, merged with the v2 position
#: deletes of the data files they delete from (rows updated before, rows of the copy).
FORMAT_3_CHANGES = ("UPDATE pair SET w = w * 2 WHERE a IN (3, 5)", "DELETE FROM pair WHERE a = 6")
#: One transaction under ``binlog_row_image = MINIMAL``: images without every column, which
#: binlake commits by MERGE, whose deletes are position deletes (in the compacted file and in
#: the fresh rows' file).
MINIMAL_IMAGE_CHANGES = (
    "UPDATE big SET v = 'minimal', at = '2030-01-01 00:00:00.5' "
    "WHERE id % 997 = 5 OR id IN (1000010, 1000020)",
    "DELETE FROM big WHERE id % 997 = 6 OR id = 1000030",
)


@dataclass(frozen=True)
class ReadWorld:
    """``live_copy``'s keyed tables changed again, and the source's rows of each."""

    big: WarehouseTable
    pair: WarehouseTable
    source_rows: dict[str, list[tuple[Any, ...]]]


def run_transaction(source: MariaDBSandbox, database: str, *statements: str) -> None:
    with source.connect(database, autocommit=False) as conn, conn.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)
        conn.commit()


@pytest.fixture(scope="module")
def read_world(live_copy: LiveCopy, source: MariaDBSandbox, spark: object) -> ReadWorld:
    """Both keyed tables take updates and deletes (row deltas' position deletes); `binlake
    maintain` compacts ``big`` (its compaction and pruning: no delete file left), fresh rows add
    a data file of binlake's own, then updates and deletes under MINIMAL row images give
    ``big`` MERGE's position deletes (format v2). ``pair`` is turned to format v3 after its
    first row delta: its next one writes deletion vectors holding the older deletes too."""
    database, config = live_copy.database, live_copy.config
    run_transaction(source, database, *FULL_IMAGE_CHANGES)
    replicate_in_process(config, spark)
    maintain = config.with_name("maintain.toml")
    maintain.write_text(config.read_text() + maintaining_only("compact"))
    console = Console(io.StringIO(), live=False)
    maintainer = Maintainer(load_config(maintain), spark, console)  # type: ignore[arg-type]
    maintainer.maintain(TableName(database, "big"), orphans_due=False)
    pair = WarehouseTable(lake_warehouse(spark), "lake", database, "pair").spark_name
    spark.sql(f"ALTER TABLE {pair} SET TBLPROPERTIES ('format-version' = '3')")  # type: ignore[attr-defined]
    run_transaction(source, database, FRESH_ROWS, *FORMAT_3_CHANGES)
    replicate_in_process(config, spark)
    minimal = "SET SESSION binlog_row_image = 'MINIMAL'"
    run_transaction(source, database, minimal, *MINIMAL_IMAGE_CHANGES)
    replicate_in_process(config, spark)
    warehouse = lake_warehouse(spark)
    tables = {t: WarehouseTable(warehouse, "lake", database, t) for t in ("big", "pair")}
    with source.connect(database) as conn, conn.cursor() as cursor:
        rows = {t: source_rows(cursor, database, t, tables[t].columns()) for t in tables}
    return ReadWorld(tables["big"], tables["pair"], rows)


@pytest.mark.parametrize("reader", READERS)
def test_a_copied_then_streamed_table_with_position_deletes_reads_as_the_source(
    read_world: ReadWorld, spark: object, reader: str
) -> None:
    """Copied, streamed, compacted by `binlake maintain`, given fresh rows by a row delta, then
    changed by MERGE: with position delete files live (and no equality delete) in Spark's files
    and binlake's own, Spark, PyIceberg and DuckDB read the source's rows, every value exact."""
    table = read_world.big
    deletes = delete_files(spark, table)
    assert deletes["position"] >= 1 and deletes["equality"] == 0, deletes
    files = spark.sql(f"SELECT file_path FROM {table.spark_name}.data_files").collect()  # type: ignore[attr-defined]
    assert any(r[0].endswith("-data.parquet") for r in files), "a row delta's data file is live"
    got = read_rows(reader, table, spark)
    problem = differences(reader, table, got, read_world.source_rows["big"])
    assert not problem, problem


@pytest.mark.parametrize("reader", READERS)
def test_a_replicated_table_deletes_by_position_so_every_reader_reads_it_as_the_source(
    read_world: ReadWorld, spark: object, reader: str
) -> None:
    """Updates and deletes replicated by row deltas (``[applier] deletes = "position"``, the
    default) leave position deletes and no equality delete; on this format-v3 table, deletion
    vectors merged with the v2 position-delete files before them: Spark, DuckDB and PyIceberg
    (which refuses equality deletes) read the source's rows."""
    table = read_world.pair
    deletes = delete_files(spark, table)
    assert deletes["position"] >= 1 and deletes["equality"] == 0, deletes
    query = f"SELECT DISTINCT file_format FROM {table.spark_name}.delete_files"
    assert "PUFFIN" in {r[0] for r in spark.sql(query).collect()}  # type: ignore[attr-defined]
    got = read_rows(reader, table, spark)
    problem = differences(reader, table, got, read_world.source_rows["pair"])
    assert not problem, problem


@pytest.fixture(scope="module")
def copied_types(
    tmp_path_factory: pytest.TempPathFactory, source: MariaDBSandbox, spark: object
) -> list[tuple[WarehouseTable, list[tuple[Any, ...]]]]:
    """The type coverage workload (every mapped type: NULLs, zero dates, DECIMAL(65,30),
    charsets, blobs, geometry, UUID and INET...) written before binlake starts, then copied by
    the initial snapshot: each table is chunk files binlake wrote itself, no delete file. Each
    table with the source's rows."""
    database = "snap_types"
    source.execute(f"CREATE DATABASE {database}")
    tables = all_tables()
    with source.connect(database, autocommit=False) as conn, conn.cursor() as cursor:
        run_workload(cursor, database, tables)
    config = snapshot_config(tmp_path_factory.mktemp("snap-types"), source, spark, database)
    replicate_in_process(config, spark)
    warehouse = lake_warehouse(spark)
    out = []
    with source.connect(database) as conn, conn.cursor() as cursor:
        for table in tables:
            located = WarehouseTable(warehouse, "lake", database, table.name)
            out.append((located, source_rows(cursor, database, table.name, located.columns())))
    return out


@pytest.mark.parametrize("reader", READERS)
def test_every_type_copied_by_the_initial_snapshot_reads_as_the_source_in_every_reader(
    copied_types: list[tuple[WarehouseTable, list[tuple[Any, ...]]]], spark: object, reader: str
) -> None:
    for table, want in copied_types:
        got = read_rows(reader, table, spark)
        problem = differences(reader, table, got, want)
        assert not problem, problem
    assert sum(len(want) for _, want in copied_types) >= 20


def chunk_commits(config_path: Path, spark: object, table: str) -> list[dict[str, str]]:
    config = load_config(config_path)
    name = lake_target(config).lake_table(as_table(table))
    lineage = current_lineage(spark, name)  # type: ignore[arg-type]
    return [s.summary for s in reversed(lineage) if progress_of(s.summary) is not None]


@pytest.mark.parametrize("target", ["embedded", "jdbc"], indirect=True)
def test_a_snapshot_requested_while_replicating_is_copied_between_batches(
    tmp_path: Path, source: MariaDBSandbox, spark: object, target: TargetSetup
) -> None:
    """`binlake snapshot` hands the tables to the running replicator, which copies them again
    (here: repairing rows deleted in the lake behind its back) while it keeps streaming: the
    changes of another table land between two chunk commits of the copy (its lag stays low);
    on the embedded catalog and on the JDBC catalog."""
    database = f"snap_online{target.suffix}"
    source.execute(f"CREATE DATABASE {database}")
    source.execute(f"CREATE TABLE {database}.t (id INT PRIMARY KEY, v INT)")
    source.execute(f"INSERT INTO {database}.t SELECT seq, seq FROM {database}.seq_1_to_5000")
    source.execute(f"CREATE TABLE {database}.other (id INT PRIMARY KEY, v INT)")
    source.execute(f"INSERT INTO {database}.other VALUES (1, 0)")
    # 25 chunk commits: the copy spans several batches of `other` even when one of its commits
    # (or a cut's) is slow (10 chunks spanned 1.3 s: a CI run saw no batch land in between).
    config_path = snapshot_config(tmp_path, source, spark, database, target, chunk_rows=200)
    config = load_config(config_path)
    log_path = tmp_path / "replicate.log"
    process = start_replicate(config_path, log_path)
    try:
        plan = SnapshotPlan(config.state.snapshot_plan_path)

        def first_copy_done() -> bool:
            return chunk_count(config_path, spark, f"{database}.t") > 0 and not plan.read()

        wait_for(first_copy_done, log_path)
        name = lake_target(config).lake_table(TableName(database, "t"))
        spark.sql(f"DELETE FROM {name} WHERE id <= 100")  # type: ignore[attr-defined]
        assert process.poll() is None, log_path.read_text()
        with OtherTableWriter(source, f"{database}.other"):
            asked = run_binlake("snapshot", config_path, "--tables", f"{database}.t", timeout=120)
            assert asked.returncode == 0 and "handed to the running replicator" in asked.stdout, (
                asked.stdout + asked.stderr
            )
            source.execute(f"UPDATE {database}.t SET v = -v WHERE id <= 10")
            requests = config.state.snapshot_requests_dir
            wait_for(lambda: not list(requests.iterdir()) and not plan.read(), log_path)
            wait_for(lambda: lake_count(spark, name) == 5000, log_path)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)
    output = log_path.read_text()
    assert process.returncode == 0, output
    assert f"copying {database}.t (requested)" in output
    copy = last_copy(spark, name)
    assert len(copy) >= 2, "the requested copy of 5,000 rows in chunks of 200 committed once"
    other = lake_target(config).lake_table(TableName(database, "other"))
    between = [
        s for s in current_lineage(spark, other)  # type: ignore[arg-type]
        if copy[0].committed_at < s.committed_at < copy[-1].committed_at
    ]  # fmt: skip
    assert between, "no change of the other table landed while the copy of t ran"
    replicate_in_process(config_path, spark)
    assert_verify_passes(config_path, spark)
    assert_history_is_exactly_once(config_path, spark)


class OtherTableWriter(threading.Thread):
    """Updates one row of ``table`` every 50 ms while in its ``with`` block."""

    def __init__(self, source: MariaDBSandbox, table: str) -> None:
        super().__init__(daemon=True)
        self.source, self.table = source, table
        self.stop = threading.Event()

    def run(self) -> None:
        with self.source.connect() as conn, conn.cursor() as cursor:
            while not self.stop.wait(0.05):
                cursor.execute(f"UPDATE {self.table} SET v = v + 1")
                conn.commit()

    def __enter__(self) -> OtherTableWriter:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.join()


def last_copy(spark: object, name: str) -> list[Snapshot]:
    """The chunk commits of the table's newest copy, oldest first."""
    lineage = current_lineage(spark, name)  # type: ignore[arg-type]
    ids = [p.id for s in lineage if (p := progress_of(s.summary)) is not None]
    return [
        s for s in reversed(lineage)
        if (p := progress_of(s.summary)) is not None and p.id == ids[0] and not p.done
    ]  # fmt: skip


def wait_for(
    condition: Callable[[], bool], log_path: Path, timeout: float = 180.0, poll_s: float = 0.5
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out; replicate printed:\n" + log_path.read_text()
        time.sleep(poll_s)


def chunk_count(config_path: Path, spark: object, table: str) -> int:
    try:
        return len(chunk_commits(config_path, spark, table))
    except Exception:  # not created yet
        return 0


def lake_count(spark: object, name: str) -> int:
    spark.sql(f"REFRESH TABLE {name}")  # type: ignore[attr-defined]
    return int(spark.sql(f"SELECT COUNT(*) FROM {name}").collect()[0][0])  # type: ignore[attr-defined]


def test_a_chunk_read_killed_on_the_server_is_a_lost_connection_spark_retries(
    source: MariaDBSandbox,
) -> None:
    """``KILL QUERY`` mid-result: the reader raises ``SourceConnectionLostError`` with the
    server's code (the task fails and Spark runs it again); a row over 16 MiB is joined from its
    continuation packets, and the connection is usable after it."""
    with source.connect() as conn:
        reader = TextResultReader(conn, where="test")
        _, blocks = reader.query("SELECT seq, REPEAT('z', 200) FROM mysql.seq_1_to_20000000")
        next(blocks)
        with source.connect() as killer, killer.cursor() as cursor:
            cursor.execute(f"KILL QUERY {conn.thread_id()}")
        with pytest.raises(SourceConnectionLostError) as caught:
            for _ in blocks:
                pass
        assert caught.value.code in (1317, 1927)
    size = 17 * 1024 * 1024
    source.execute("SET GLOBAL max_allowed_packet = 64 * 1024 * 1024")  # new connections
    with source.connect() as conn:
        _, blocks = TextResultReader(conn, where="test").query(
            f"SELECT 1, REPEAT('a', {size}), 2 UNION ALL SELECT 3, 'b', 4"
        )
        cells = [locate(block, 3) for block in blocks]
        lengths = [len(v) for c in cells for v in as_binary_view(c[1]).to_pylist()]
        assert lengths == [size, 1]
        with conn.cursor() as cursor:
            cursor.execute("SELECT 42")
            assert cursor.fetchone() == (42,)


#: A fault during a copy, and the target it runs on (the executor is lost on the cluster).
FAULTS = [
    pytest.param("source_restarted", "embedded", id="source_restarted"),
    pytest.param("chunk_read_killed", "embedded", id="chunk_read_killed"),
    pytest.param("executor_lost", "cluster-jdbc", id="executor_lost"),
]


@pytest.mark.parametrize(("fault", "target"), FAULTS, indirect=["target"])
def test_a_copy_hit_by_a_fault_mid_way_goes_on_with_every_row_once(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    source: MariaDBSandbox,
    spark: object,
    target: TargetSetup,
    fault: str,
) -> None:
    """Once the copy's first chunk file is written: the source restarted, the read of a chunk
    killed on the server (``KILL QUERY``), or the executor JVM killed on the cluster. The copy
    retries its tasks or resumes after its committed chunks on its own, `binlake replicate`
    exits 0 with no stack trace in its output, and every row lands exactly once."""
    database = f"snap_{fault}{target.suffix}"
    source.execute(f"CREATE DATABASE {database}")
    source.execute(f"CREATE TABLE {database}.t (id INT PRIMARY KEY, v VARCHAR(20))")
    source.execute(
        f"INSERT INTO {database}.t SELECT seq, CONCAT('r', seq) FROM {database}.seq_1_to_2000"
    )
    config = snapshot_config(tmp_path, source, spark, database, target, chunk_rows=100)
    root = lake_warehouse(spark) if target.embedded else request.getfixturevalue("jdbc_warehouse")
    log_path = tmp_path / "replicate.log"
    process = start_replicate(config, log_path, "--until-caught-up")
    try:
        chunk_files = f"*{database}*/**/binlake-copy-*.parquet"
        wait_for(lambda: any(root.glob(chunk_files)), log_path, poll_s=0.05)
        if fault == "source_restarted":
            source.restart()
        elif fault == "chunk_read_killed":
            assert kill_a_chunk_read(source, database), log_path.read_text()
        else:
            assert target.cluster is not None
            pids = target.cluster.executor_pids()
            assert pids, "no executor to kill"
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
        assert process.wait(300) == 0, log_path.read_text()
    finally:
        if process.poll() is None:
            process.kill()
    output = log_path.read_text()
    assert "\tat " not in output and "Traceback" not in output, output
    assert f"snapshot: {database}.t: " in output and " rows copied in " in output, output
    assert fault != "executor_lost" or "Lost executor" in output, output
    replicate_in_process(config, spark)  # what the source logged since (a restart rotates)
    assert_verify_passes(config, spark)
    assert_history_is_exactly_once(config, spark)


def kill_a_chunk_read(source: MariaDBSandbox, database: str) -> int:
    """Hold the table (``LOCK TABLES ... WRITE``) until a chunk's SELECT waits for it, ``KILL
    QUERY`` the waiting reads, then let the table go; how many were killed."""
    pattern = f"SELECT %FROM `{database}`.`t` WHERE%"
    with source.connect() as locker, locker.cursor() as cursor:
        cursor.execute(f"LOCK TABLES {database}.t WRITE")
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                cursor.execute(
                    "SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE %s "
                    "AND STATE LIKE %s",
                    (pattern, "%metadata lock%"),
                )
                waiting = [row[0] for row in cursor.fetchall()]
                for thread in waiting:
                    cursor.execute(f"KILL QUERY {thread}")
                if waiting:
                    return len(waiting)
                time.sleep(0.05)
            return 0
        finally:
            cursor.execute("UNLOCK TABLES")
