"""`binlake status` against a real MariaDB, a real relay log and Iceberg tables: positions, lag
in bytes and seconds per table, relay size, checkpoint; JSON shape; an unreachable source.
The main cases run on the embedded catalog (its metadata files) and on Iceberg's JDBC catalog
(PostgreSQL: positions from the catalog's database, no Spark)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from binlake.cli.status_cmd import render_status
from binlake.config import load_config
from binlake.lake.catalog.target import LakeTarget
from binlake.position import SourcePosition
from binlake.storage.checkpoint import CheckpointRecord
from binlake.verify.status import StatusReport, TableStatus, collect_status
from binlake_dev.sandbox import MariaDBSandbox, free_port
from conftest import require_mariadb
from lake_builder import commit_state, create_lake_table, isolated_catalog, master_position, replay
from lake_targets import CatalogDatabase, register_jdbc_catalog
from receiver_testing import describe, receive_env, run_receive, write_config


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBSandbox]:
    require_mariadb()
    sandbox = MariaDBSandbox(tmp_path_factory.mktemp("status-source"))
    try:
        yield sandbox.start()
    finally:
        sandbox.kill()


def execute(source: MariaDBSandbox, db: str, *statements: str) -> SourcePosition:
    with source.connect(db) as conn, conn.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)
    return master_position(source)


class Lake:
    """Two replicated tables at position X, one created but never written, then two more
    transactions on ``t1`` in the source and the relay log (not applied). ``jdbc``: in a JDBC
    catalog of its own (its config file says so) instead of a Hadoop catalog."""

    def __init__(
        self,
        source: MariaDBSandbox,
        spark: SparkSession,
        folder: Path,
        jdbc: CatalogDatabase | None = None,
    ) -> None:
        self.db = f"s_{uuid.uuid4().hex[:10]}"
        source.execute(f"CREATE DATABASE {self.db}")
        warehouse = folder / "warehouse"
        self.config_path = write_config(folder / "binlake.toml", source.port, folder / "state")
        if jdbc is None:
            self.target: LakeTarget = isolated_catalog(spark, warehouse)
        else:
            self.target = register_jdbc_catalog(spark, jdbc, f"j{self.db}", warehouse)
            with self.config_path.open("a") as config:
                config.write(f'[target]\ncatalog = "{self.target.catalog}"\n')
                config.write(jdbc.section(warehouse))
        statements = [f"CREATE TABLE {t} (id INT PRIMARY KEY, v INT)" for t in ("t1", "t2", "t3")]
        statements += ["INSERT INTO t1 VALUES (1, 1), (2, 2)", "INSERT INTO t2 VALUES (1, 1)"]
        self.applied = execute(source, self.db, *statements)
        names = [f"{self.db}.{t}" for t in ("t1", "t2", "t3")]
        replayed = replay(source, names[:2], until=self.applied)
        for name in names[:2]:
            commit_state(spark, self.target, name, replayed[name], self.applied)
        create_lake_table(spark, self.target, names[2], replayed[names[0]].schema)
        self.first_pending_at = time.time()
        self.end = execute(source, self.db, "UPDATE t1 SET v = 10", "DELETE FROM t1 WHERE id = 2")
        run = run_receive(self.config_path, "--until-caught-up")
        assert run.returncode == 0, describe(run)

    def status(self) -> StatusReport:
        return collect_status(load_config(self.config_path), self.target)


@pytest.fixture(params=["hadoop"])
def lake(
    source: MariaDBSandbox, spark: SparkSession, tmp_path: Path, request: pytest.FixtureRequest
) -> Lake:
    """The status tests' lake; ``@pytest.mark.parametrize("lake", ["hadoop", "jdbc"],
    indirect=True)`` runs a test on both catalogs."""
    jdbc = request.getfixturevalue("catalog_db") if request.param == "jdbc" else None
    return Lake(source, spark, tmp_path, jdbc)


@pytest.mark.parametrize("lake", ["hadoop", "jdbc"], indirect=True)
def test_status_shows_positions_and_lag_for_two_tables_and_an_empty_one(lake: Lake) -> None:
    report = lake.status()
    assert report.source.reachable and report.source.position == lake.end
    assert report.relay.end == lake.end and report.relay.behind_source_bytes == 0
    assert report.relay.files >= 1 and report.relay.bytes > 0
    assert report.relay.checkpoint is None
    tables = {str(t.source_table): t for t in report.tables}
    t1, t2, t3 = (tables[f"{lake.db}.{t}"] for t in ("t1", "t2", "t3"))
    assert t1.applied_position == lake.applied and t1.pending_transactions == 2
    assert t1.lag_bytes == lake.end.offset - lake.applied.offset
    assert (
        t1.lag_seconds is not None and 0 <= t1.lag_seconds < time.time() - lake.first_pending_at + 5
    )
    assert (t2.applied_position, t2.pending_transactions, t2.lag_bytes, t2.lag_seconds) == (
        lake.applied,
        0,
        0,
        0.0,
    ), "a quiet table is as current as the relay log"
    assert t2.batch == "1" and t2.snapshot_id is not None
    assert (t3.applied_position, t3.snapshot_id, t3.pending_transactions) == (None, None, 0)
    text = render_status(report)
    assert (
        f"source     127.0.0.1:{lake.config_path and load_config(lake.config_path).source.port}"
        in text
    )
    assert f"relay      at {lake.end}" in text and "checkpoint none recorded" in text
    line = next(x for x in text.splitlines() if x.strip().startswith(f"{lake.db}.t1"))
    assert str(lake.applied) in line and "  2  " in line


def test_status_reads_the_recorded_checkpoint(lake: Lake) -> None:
    config = load_config(lake.config_path)
    CheckpointRecord(config.state.checkpoint_path).write("relay-bin.000002")
    assert lake.status().relay.checkpoint == "relay-bin.000002"


def test_a_damaged_checkpoint_is_reported_in_full_then_status_exits_65(lake: Lake) -> None:
    config = load_config(lake.config_path)
    config.state.checkpoint_path.write_bytes(b"not a binlake checkpoint record\n")
    run = status_cli(lake.config_path)
    assert run.returncode == 65, describe(run)
    assert "checkpoint unreadable" in run.stdout and f"{lake.db}.t1" in run.stdout
    assert run.stderr.startswith("error: checkpoint unreadable") and "hint: " in run.stderr
    assert "Traceback" not in run.stderr


def status_cli(config: Path, *args: str, code: str = "") -> subprocess.CompletedProcess[str]:
    """`binlake status` in a fresh interpreter; ``code`` runs after it (to inspect modules)."""
    script = (
        "import sys\nfrom binlake.cli.main import run\n"
        f"rc = run(['status', '--config', {str(config)!r}, *{list(args)!r}])\n{code}\n"
        "sys.exit(rc)\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=receive_env(),
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("lake", ["hadoop", "jdbc"], indirect=True)
def test_status_json_has_a_stable_shape_and_needs_no_spark(lake: Lake, tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    assert warehouse == lake.target.warehouse, "the config's default warehouse is beside it"
    run = status_cli(lake.config_path, "--json", code="assert 'pyspark' not in sys.modules")
    assert run.returncode == 0, describe(run)
    data = json.loads(run.stdout)
    assert set(data) == {
        "version",
        "generated_at",
        "source",
        "relay",
        "catalog",
        "warehouse",
        "location",
        "tables",
    }
    assert set(data["source"]) == {
        "address", "reachable", "position", "gtid_position", "binlog_files", "error", "hint",
    }  # fmt: skip
    assert set(data["relay"]) == {
        "dir", "files", "bytes", "end", "end_timestamp", "checkpoint", "checkpoint_error",
        "behind_source_bytes",
    }  # fmt: skip
    catalog = "lake" if lake.target.embedded else lake.target.catalog
    assert data["version"] == 1 and data["catalog"] == catalog
    assert warehouse.as_uri() in data["location"] or data["location"] == str(warehouse)
    assert len(data["tables"]) == 3
    for table in data["tables"]:
        assert set(table) == {
            "table", "source_table", "source", "applied_position", "snapshot_id",
            "committed_at_ms", "batch", "pending_transactions", "lag_bytes", "lag_seconds",
            "problem", "commit_retries", "write", "write_reason", "delete_files",
            "equality_deletes",
        }  # fmt: skip
    t1 = next(t for t in data["tables"] if t["source_table"] == f"{lake.db}.t1")
    assert t1["source"] == {"database": lake.db, "table": "t1"} and t1["commit_retries"] == 0
    assert t1["applied_position"] == str(lake.applied) and t1["pending_transactions"] == 2


def test_status_with_an_unreachable_source_says_so_and_prints_the_rest(lake: Lake) -> None:
    text = lake.config_path.read_text().replace(
        f"port = {load_config(lake.config_path).source.port}", f"port = {free_port()}"
    )
    lake.config_path.write_text(text)
    run = status_cli(lake.config_path)
    assert run.returncode == 0, describe(run)
    assert "UNREACHABLE" in run.stdout and "hint: check [source] host and port" in run.stdout
    assert f"relay      at {lake.end}" in run.stdout
    assert f"{lake.db}.t1" in run.stdout and f"{lake.db}.t3" in run.stdout
    data = json.loads(status_cli(lake.config_path, "--json").stdout)
    assert data["source"]["reachable"] is False and data["source"]["hint"]
    t1 = next(t for t in data["tables"] if t["source_table"] == f"{lake.db}.t1")
    assert t1["lag_bytes"] is None and t1["pending_transactions"] == 2


def test_status_of_an_empty_state_folder_and_warehouse(
    source: MariaDBSandbox, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "binlake.toml", source.port, tmp_path / "state")
    run = status_cli(config, "--json")
    assert run.returncode == 0, describe(run)
    data = json.loads(run.stdout)
    assert data["tables"] == [] and data["relay"]["end"] is None and data["relay"]["files"] == 0
    assert data["source"]["position"] == str(master_position(source))


def test_status_through_spark_for_a_catalog_it_cannot_read_as_files(
    lake: Lake, spark: SparkSession
) -> None:
    """A catalog set in [spark] conf (REST, Hive...) is listed through Spark: same facts."""
    from binlake.lake.spark.lineage import spark_lake_tables

    files = lake.status()
    prefix = f"spark.sql.catalog.{lake.target.catalog}"
    through_spark = replace(lake.target, spark_conf={prefix: spark.conf.get(prefix)})
    assert not through_spark.embedded
    report = collect_status(
        load_config(lake.config_path), through_spark, lambda t: spark_lake_tables(spark, t)
    )

    def facts(tables: tuple[TableStatus, ...]) -> dict[str | None, TableStatus]:
        return {str(t.source_table): replace(t, lag_seconds=None) for t in tables}  # time moves

    assert facts(report.tables) == facts(files.tables)
