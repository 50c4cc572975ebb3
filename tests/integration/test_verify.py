"""`binlake verify` against a real MariaDB and real Iceberg tables.

The lake side is built the way the applier writes it (tests/lake_builder.py: the source's own
binlog decoded, replayed per key, mapped with binlake.typemap, committed with a
``binlake.position``), so these tests do not depend on the applier. A private MariaDB for the
module keeps binlog positions and the relay log small; every test has its own database and its
own Iceberg catalog folder.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from binlake.binlog.names import TableName
from binlake.cli.verify_cmd import verdict
from binlake.config import Config, load_config
from binlake.lake.catalog.metadata import read_table
from binlake.lake.catalog.target import LakeTarget
from binlake.position import SourcePosition
from binlake.verify.errors import (
    CatchUpTimeoutError,
    TableMissingInLakeError,
    TableNotInSourceError,
)
from binlake.verify.verifier import VerifyOptions, VerifyReport, verify_config
from binlake_dev.sandbox import MariaDBSandbox, free_port
from conftest import require_mariadb
from lake_builder import (
    commit_changelog,
    commit_state,
    create_lake_table,
    isolated_catalog,
    master_position,
    replay,
    write_rows,
)
from lake_targets import register_jdbc_catalog
from receiver_testing import describe, receive_env, run_receive, write_config
from type_workload import all_tables, run_workload

TYPE_TABLES = ("ints", "numbers", "times", "old_times", "strings", "geo")


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBSandbox]:
    require_mariadb()
    sandbox = MariaDBSandbox(tmp_path_factory.mktemp("verify-source"))
    try:
        yield sandbox.start()
    finally:
        sandbox.kill()


@dataclass
class World:
    source: MariaDBSandbox
    spark: SparkSession
    db: str
    target: LakeTarget
    config_path: Path

    @property
    def config(self) -> Config:
        return load_config(self.config_path)

    def sql(self, *statements: str, log: bool = True) -> SourcePosition:
        with self.source.connect(self.db) as conn, conn.cursor() as cursor:
            if not log:
                cursor.execute("SET SESSION sql_log_bin = 0")
            for statement in statements:
                cursor.execute(statement)
        return master_position(self.source)

    def lake(self, *tables: str, at: SourcePosition | None = None, batch: int = 1) -> None:
        """Commit the named tables' state at ``at`` (default: now) to the lake."""
        position = at if at is not None else master_position(self.source)
        names = [f"{self.db}.{t}" for t in tables]
        replayed = replay(self.source, names, until=position)
        for name in names:
            commit_state(self.spark, self.target, name, replayed[name], position, batch)

    def receive(self) -> None:
        run = run_receive(self.config_path, "--until-caught-up")
        assert run.returncode == 0, describe(run)

    def verify(self, *tables: str, timeout: float = 10.0, progress: Any = None) -> VerifyReport:
        names = tuple(TableName(self.db, t) for t in tables) or None
        return verify_config(
            self.config,
            VerifyOptions(tables=names, timeout_s=timeout, poll_s=0.1),
            progress,
            target=self.target,
            spark_session=self.spark,
        )


@pytest.fixture(params=["hadoop"])
def world(
    source: MariaDBSandbox, spark: SparkSession, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[World]:
    """A test's database and lake; ``@pytest.mark.parametrize("world", ["hadoop", "jdbc"],
    indirect=True)`` runs a test on an embedded-style Hadoop catalog and on a JDBC catalog
    (lineages read from its database, data through Spark)."""
    db = f"v_{uuid.uuid4().hex[:10]}"
    source.execute(f"CREATE DATABASE {db}")
    if request.param == "jdbc":
        database = request.getfixturevalue("catalog_db")
        target = register_jdbc_catalog(spark, database, f"j{db}", tmp_path / "warehouse")
    else:
        target = isolated_catalog(spark, tmp_path / "warehouse")
    config = write_config(tmp_path / "binlake.toml", source.port, tmp_path / "state")
    yield World(source, spark, db, target, config)
    source.execute(f"DROP DATABASE IF EXISTS {db}")


def kv(world: World, *tables: str) -> SourcePosition:
    """Tables ``(id INT PRIMARY KEY, v VARCHAR(20))`` with rows 1..4; the position after."""
    for table in tables:
        world.sql(
            f"CREATE TABLE {table} (id INT PRIMARY KEY, v VARCHAR(20))",
            f"INSERT INTO {table} VALUES (1, 'one'), (2, 'two'), (3, 'three'), (4, NULL)",
        )
    return master_position(world.source)


@pytest.fixture(scope="module")
def typed(source: MariaDBSandbox) -> Iterator[str]:
    """A database holding the type-coverage workload (every mapped type, NULLs, zero dates,
    DECIMAL(65,30), utf8mb4 and other charsets, blobs, geometry, UUID/INET)."""
    db = f"types_{uuid.uuid4().hex[:8]}"
    source.execute(f"CREATE DATABASE {db}")
    tables = [t for t in all_tables(large=False) if t.name in TYPE_TABLES]
    with source.connect(db, autocommit=False) as conn, conn.cursor() as cursor:
        run_workload(cursor, db, tables)
    yield db
    source.execute(f"DROP DATABASE IF EXISTS {db}")


def typed_world(world: World, typed: str) -> World:
    world.db = typed
    world.lake(*TYPE_TABLES)
    return world


@pytest.mark.parametrize("world", ["hadoop", "jdbc"], indirect=True)
def test_verify_passes_for_every_mapped_type(world: World, typed: str) -> None:
    report = typed_world(world, typed).verify(*TYPE_TABLES)
    assert report.ok, [(r.table, r.status, r.schema_problems, r.error) for r in report.results]
    rows = {r.table.table: r.source_rows for r in report.results}
    assert rows == {"ints": 3, "numbers": 3, "times": 4, "old_times": 3, "strings": 3, "geo": 2}
    assert all(r.source_checksum == r.lake_checksum for r in report.results)
    assert verdict(report) == 0


#: (table, column, a change of one unit in the lake value)
ONE_UNIT_CHANGES: list[tuple[str, str, Callable[[Any], Any]]] = [
    ("ints", "biu", lambda v: v - 1),
    ("numbers", "f", lambda v: v * (1 + 2**-23)),  # the next float32
    ("numbers", "dec2", lambda v: v[:-1] + ("1" if v[-1] != "1" else "2")),  # DECIMAL(65,30)
    ("times", "dt6", lambda v: v.replace(microsecond=(v.microsecond + 1) % 10**6)),
    ("strings", "vc", lambda v: v[:-1] + "Z"),
    ("geo", "g", lambda v: v[:-1] + bytes([v[-1] ^ 1])),
]


def test_verify_detects_a_one_unit_change_in_any_type(world: World, typed: str) -> None:
    """A float's last bit, a microsecond, DECIMAL(65,30)'s last digit, one character, one byte:
    each changed in the lake copy of a different row, each found."""
    world.db = typed
    position = master_position(world.source)
    replayed = replay(world.source, [f"{typed}.{t}" for t in TYPE_TABLES], until=position)
    changed: dict[str, set[int]] = {}
    for table in TYPE_TABLES:
        name = f"{typed}.{table}"
        schema = replayed[name].schema
        rows = [list(r) for r in replayed[name].lake_rows()]
        for i, (_, column, change) in enumerate(c for c in ONE_UNIT_CHANGES if c[0] == table):
            index = [c.name for c in schema.columns].index(column)
            row = [r for r in rows if r[index] is not None][i]
            row[index] = change(row[index])
            changed.setdefault(table, set()).add(row[0])
        lake_name = create_lake_table(world.spark, world.target, name, schema)
        write_rows(world.spark, lake_name, schema, [tuple(r) for r in rows], position)
    report = world.verify(*TYPE_TABLES)
    found = {
        r.table.table: {json.loads(k)[0] for k in r.differences.changed}
        for r in report.results
        if r.status == "different"
    }
    assert found == changed
    assert [r.status for r in report.results if r.table.table == "old_times"] == ["ok"]
    assert verdict(report) == 1


@pytest.mark.parametrize("world", ["hadoop", "jdbc"], indirect=True)
def test_verify_lists_the_keys_of_missing_extra_and_changed_rows(world: World) -> None:
    kv(world, "t")
    world.lake("t")
    world.sql(
        "INSERT INTO t VALUES (100, 'new')",
        "DELETE FROM t WHERE id = 2",
        "UPDATE t SET v = 'THREE' WHERE id = 3",
        "UPDATE t SET v = '' WHERE id = 4",
        log=False,  # the binlog (and so P) does not move: the lake is simply wrong now
    )
    (result,) = world.verify("t").results
    assert result.status == "different"
    d = result.differences
    assert (d.missing_in_lake, d.extra_in_lake, d.changed) == (["[100]"], ["[2]"], ["[3]", "[4]"])
    assert (result.source_rows, result.lake_rows) == (4, 4)
    assert result.source_checksum != result.lake_checksum


def test_verify_compares_a_table_without_primary_key_as_a_multiset_of_rows(world: World) -> None:
    world.sql(
        "CREATE TABLE log (a INT, b VARCHAR(10))",
        "INSERT INTO log VALUES (1, 'x'), (1, 'x'), (2, NULL)",
    )
    world.lake("log")
    (same,) = world.verify("log").results
    assert same.ok and same.keyless and same.source_rows == 3
    world.sql("DELETE FROM log WHERE a = 1 LIMIT 1", log=False)
    (result,) = world.verify("log").results
    assert result.status == "different"
    assert result.differences.extra_count == 1 and result.differences.extra_in_lake[0].endswith(
        "x1"
    )


@pytest.mark.parametrize("world", ["hadoop", "jdbc"], indirect=True)
def test_verify_replays_a_change_log_table_to_its_final_state(world: World) -> None:
    """A table without a key is replicated as a change log (insert, update_before,
    update_after, delete rows); verify compares what replaying it leaves with the source."""
    world.sql(
        "CREATE TABLE events (a INT, b VARCHAR(10))",
        "INSERT INTO events VALUES (1, 'x'), (1, 'x'), (2, 'y'), (3, NULL)",
        "UPDATE events SET b = 'z' WHERE a = 2",
        "DELETE FROM events WHERE a = 3",
        "DELETE FROM events WHERE a = 1 LIMIT 1",
    )
    position = master_position(world.source)
    name = f"{world.db}.events"
    replayed = replay(world.source, [name])[name]
    commit_changelog(world.spark, world.target, name, replayed, position)
    (result,) = world.verify("events").results
    assert result.ok and result.keyless, result
    assert (result.source_rows, result.lake_rows) == (2, 2)
    world.sql("INSERT INTO events VALUES (2, 'z')", log=False)
    (different,) = world.verify("events").results
    assert different.status == "different" and different.differences.missing_count == 1


def test_a_later_transaction_on_another_table_only_does_not_block_verification(
    world: World,
) -> None:
    q = kv(world, "t1", "t2")
    world.lake("t1", "t2")
    p = world.sql("INSERT INTO t2 VALUES (5, 'five')")
    world.receive()
    (result,) = world.verify("t1").results
    assert result.ok and result.attempts == 1
    assert (result.lake_position, result.position) == (q, p)


def test_an_unapplied_change_to_the_table_times_out_with_a_typed_error(world: World) -> None:
    kv(world, "t1")
    world.lake("t1")
    p = world.sql("UPDATE t1 SET v = 'changed' WHERE id = 1")
    world.receive()
    (result,) = world.verify("t1", timeout=0.5).results
    assert result.status == "error" and isinstance(result.error, CatchUpTimeoutError)
    assert result.error.target == str(p) and "not applied yet" in str(result.error)
    assert "binlake replicate" in result.error.hint
    assert verdict(report=world.verify("t1", timeout=0.2)) == 70


@pytest.mark.parametrize("world", ["hadoop", "jdbc"], indirect=True)
def test_a_batch_that_steps_over_the_snapshot_position_triggers_a_retry(world: World) -> None:
    """The source is at P with a change to t not yet applied; while verify waits, the "applier"
    commits one snapshot holding that change and a later one (position Z > P): t's state at P
    is in no snapshot, so verify takes a new snapshot (P' = Z) and compares there."""
    kv(world, "t")
    world.lake("t")
    world.sql("UPDATE t SET v = 'first' WHERE id = 1")
    world.receive()
    waiting = threading.Event()
    messages: list[str] = []

    started = time.monotonic()

    def progress(message: str) -> None:
        messages.append(f"{time.monotonic() - started:.1f}s {message}")
        if "waiting" in message:
            waiting.set()

    outcome: list[VerifyReport | BaseException] = []

    def run() -> None:
        try:
            outcome.append(world.verify("t", timeout=60, progress=progress))
        except BaseException as error:  # reported below with its message, not lost
            outcome.append(error)

    thread = threading.Thread(target=run, name="verify")
    thread.start()
    try:
        assert waiting.wait(30), messages
        z = world.sql("UPDATE t SET v = 'second' WHERE id = 2")
        world.receive()
        world.lake("t", at=z, batch=2)
        progress("test: committed the later snapshot")
    finally:
        thread.join(90)
    assert not thread.is_alive(), f"verify still running after 90 s: {messages}"
    (report,) = outcome
    if isinstance(report, BaseException):
        trace = "".join(traceback.format_exception(report))
        pytest.fail(f"verify raised (progress: {messages}):\n{trace}")
    (result,) = report.results
    assert result.ok and result.attempts == 2, messages
    assert result.position == z and result.lake_position == z
    assert any("retrying" in m and "later snapshot" in m for m in messages)


def test_a_snapshot_another_writer_committed_is_read_by_id_as_soon_as_its_file_is_there(
    world: World,
) -> None:
    """Verify takes snapshot ids from the metadata files and reads the data through Spark
    (``VERSION AS OF``). A catalog caching its tables (Iceberg's default) misses a snapshot
    another table object committed, and one its own commit has renamed into place but not
    finished (the likely cause of the retry test above failing once): the catalogs of
    binlake's sessions and of these tests cache nothing."""
    kv(world, "t")
    world.lake("t")
    name = TableName(world.db, "t")
    lake_name = world.target.lake_table(name)
    assert world.spark.table(lake_name).count() == 4  # the table is loaded in this catalog
    other = isolated_catalog(world.spark, world.target.warehouse)  # a writer of its own
    world.spark.sql(f"INSERT INTO {other.lake_table(name)} VALUES (5, 'five')")
    table = read_table(world.target.warehouse, world.target.identifier(name))
    assert table is not None and len(table.lineage) == 2
    newest = table.lineage[0].snapshot_id
    rows = world.spark.sql(f"SELECT * FROM {lake_name} VERSION AS OF {newest}").count()
    assert rows == 5


@pytest.mark.parametrize("world", ["hadoop", "jdbc"], indirect=True)
def test_tables_missing_in_the_lake_or_the_source_are_typed_errors(world: World) -> None:
    """A table without an Iceberg table is right only while its source table is empty."""
    kv(world, "t1")
    world.lake("t1")
    world.sql("CREATE TABLE empty (id INT PRIMARY KEY)", "CREATE TABLE t2 (id INT PRIMARY KEY)")
    world.sql(*(f"INSERT INTO t2 VALUES ({i})" for i in range(4)), log=False)  # before binlake
    world.receive()
    report = world.verify("t1", "t2", "empty", timeout=5)
    ok, missing, empty = report.results
    assert ok.ok and empty.ok and empty.note and "empty" in empty.note
    assert missing.status == "error" and isinstance(missing.error, TableMissingInLakeError)
    assert missing.error.table == f"{world.db}.t2" and "binlake snapshot" in missing.error.hint
    assert "4 rows in the source" in str(missing.error)
    assert verdict(report) == 70
    with pytest.raises(TableNotInSourceError):
        world.verify("nope")


def verify_cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "binlake.cli.main", "verify", "--config", str(config)]
    return subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        env=receive_env(),
        timeout=180,
        check=False,
    )


def test_cli_verify_json_has_a_stable_shape_and_exit_zero_when_equal(world: World) -> None:
    kv(world, "t")
    world.lake("t")
    run = verify_cli(world.config_path, "--tables", f"{world.db}.t", "--json", "--timeout", "10")
    assert run.returncode == 0, describe(run)
    data = json.loads(run.stdout)
    assert set(data) == {"version", "ok", "tables"} and data["ok"] is True
    (table,) = data["tables"]
    assert set(table) == {
        "table", "source_database", "source_table", "lake_table", "status", "position",
        "lake_position", "snapshot_id", "keyless", "attempts", "source", "lake", "differences",
        "schema_problems", "note", "error",
    }  # fmt: skip
    assert (table["source_database"], table["source_table"]) == (world.db, "t")
    assert table["source"] == {"rows": 4, "checksum": table["lake"]["checksum"]}
    assert set(table["differences"]) == {"missing_in_lake", "extra_in_lake", "different"}
    assert table["differences"]["different"] == {"count": 0, "keys": []}


def test_cli_verify_with_an_unreachable_source_is_a_typed_error_with_a_hint(tmp_path: Path) -> None:
    config = write_config(tmp_path / "binlake.toml", free_port(), tmp_path / "state")
    run = verify_cli(config)
    assert run.returncode == 69, describe(run)
    assert run.stderr.startswith("error: ") and "\nhint: " in run.stderr
    assert "Traceback" not in run.stderr and run.stdout == ""


def test_verify_reads_snapshot_lists_through_spark_for_other_catalogs(world: World) -> None:
    kv(world, "t")
    world.lake("t")
    world.sql("CREATE TABLE missing_in_lake_only (id INT PRIMARY KEY)")
    world.sql("INSERT INTO missing_in_lake_only VALUES (1)", log=False)
    world.receive()
    prefix = f"spark.sql.catalog.{world.target.catalog}"
    world.target = replace(world.target, spark_conf={prefix: world.spark.conf.get(prefix)})
    assert not world.target.embedded
    (result,) = world.verify("t").results
    assert result.ok and result.source_rows == 4
    (missing,) = world.verify("missing_in_lake_only", timeout=5).results
    assert isinstance(missing.error, TableMissingInLakeError)
