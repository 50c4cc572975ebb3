"""Issue 11, part 1: other writers of a replicated table (real processes, their own Spark
sessions on the same embedded catalog) do not stop `binlake replicate`; its commits that lose
to theirs are re-planned and committed again, counted in `binlake status` and the metrics, and
the lake equals the source. Issue 14: none of the other writer's commits is silently
overwritten, and the embedded catalog's commit is a compare-and-swap across processes
(docs/spark.md, "Other writers")."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from binlake.lake.catalog.metadata import read_table
from binlake_dev.sandbox import MariaDBSandbox
from replicate_testing import (
    assert_history_is_exactly_once,
    assert_verify_passes,
    config_for,
    lake_warehouse,
    module_source,
    replicate_command,
    replicate_env,
    replicate_in_process,
    run_binlake,
)

source = module_source("concurrent-writers-source")
WRITER = Path(__file__).parents[1] / "concurrent_writer.py"
ROWS = 400


def start_writer(warehouse: Path, stop: Path, *statements: str) -> subprocess.Popen[str]:
    writer = subprocess.Popen(
        [sys.executable, str(WRITER), str(warehouse), str(stop), *statements],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=replicate_env(),
    )
    assert writer.stdout is not None
    line = writer.stdout.readline()
    assert line.strip() == "ready", writer.stderr.read() if writer.stderr else line
    return writer


def wait_for_table(warehouse: Path, identifier: tuple[str, str], timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        table = read_table(warehouse, identifier)
        if table is not None and table.latest_binlake is not None:
            return
        time.sleep(0.5)
    raise AssertionError(f"{identifier} never got its first binlake commit")


def test_replicate_keeps_running_while_another_process_alters_deletes_and_compacts(
    source: MariaDBSandbox, spark: object, tmp_path: Path
) -> None:
    database = f"cw_{uuid.uuid4().hex[:8]}"
    source.execute(f"CREATE DATABASE {database}")
    source.execute(f"CREATE TABLE {database}.t (id INT PRIMARY KEY, v INT, note VARCHAR(20))")
    values = ", ".join(f"({i}, 0, 'row {i}')" for i in range(ROWS))
    source.execute(f"INSERT INTO {database}.t VALUES {values}")
    config = config_for(
        tmp_path, source, spark, database, applier="max_seconds = 0.2\ncommit_retries = 50\n"
    )
    warehouse = lake_warehouse(spark)
    err_path = tmp_path / "replicate.err"
    with err_path.open("w") as err:
        replicate = subprocess.Popen(
            replicate_command(config), stdout=subprocess.DEVNULL, stderr=err, env=replicate_env()
        )
    stop_workload = threading.Event()
    stop_writer = tmp_path / "stop-writer"
    table = f"lake.{database}.t"
    try:
        wait_for_table(warehouse, (database, "t"))
        # Iceberg's own retries would hide most conflicts: every one reaches binlake.
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('commit.retry.num-retries'='0')")  # type: ignore[attr-defined]
        workload = threading.Thread(target=update_rows, args=(source, database, stop_workload))
        workload.start()
        writer = start_writer(
            warehouse,
            stop_writer,
            # One property per commit: a commit silently overwritten loses its property.
            f"ALTER TABLE {table} SET TBLPROPERTIES ('other.writer.{{n}}'='{{n}}')",
            f"7:DELETE FROM {table} WHERE id % 7 = 0",
            f"11:CALL lake.system.rewrite_data_files(table => '{database}.t', "
            "options => map('min-input-files', '2'))",
        )
        wait_for_retries(err_path, replicate, count=3, at_least_s=12.0)
        stop_writer.touch()
        out, err_text = writer.communicate(timeout=120)
        stop_workload.set()
        workload.join()
        assert replicate.poll() is None, err_path.read_text()[-6000:]
        assert "commits" in out and int(out.split()[-3]) > 0, out + err_text
    finally:
        stop_writer.touch()
        stop_workload.set()
        replicate.send_signal(signal.SIGTERM)
        replicate.wait(timeout=180)
    assert replicate.returncode == 0, err_path.read_text()[-6000:]
    committed = {
        line.split()[1]
        for line in out.splitlines()
        if line.startswith("ok ") and line.endswith(" 0")
    }
    kept = {k.removeprefix("other.writer.") for k in properties(spark, table)}
    assert committed and committed <= kept, sorted(committed - kept)
    # The other writer's DELETEs took rows the source still has: update every row once more, so
    # that the lake equals the source again (the MERGE inserts a key it no longer holds).
    source.execute(f"UPDATE {database}.t SET v = v + 1")
    replicate_in_process(config, spark)  # the catch-up: no process of its own needed
    assert assert_verify_passes(config, spark) == [f"{database}.t"]
    assert_history_is_exactly_once(config, spark)
    status = run_binlake("status", config, "--json")
    retries = sum(t["commit_retries"] for t in json.loads(status.stdout)["tables"])
    assert retries > 0, status.stdout
    assert "re-planning and committing again" in err_path.read_text()


def wait_for_retries(
    err_path: Path, replicate: subprocess.Popen[bytes], count: int, at_least_s: float
) -> None:
    """Until replicate logged ``count`` conflict retries and ``at_least_s`` passed (the writer's
    DELETEs and compactions come every 7th and 11th of its commits), at most 90 s."""
    started = time.monotonic()
    while time.monotonic() - started < 90.0 and replicate.poll() is None:
        retries = err_path.read_text(errors="replace").count("re-planning and committing again")
        if retries >= count and time.monotonic() - started >= at_least_s:
            return
        time.sleep(0.5)


def update_rows(source: MariaDBSandbox, database: str, stop: threading.Event) -> None:
    n = 0
    with source.connect(database) as conn, conn.cursor() as cursor:
        while not stop.is_set():
            n += 1
            cursor.execute(
                "UPDATE t SET v = v + 1, note = %s WHERE id %% 10 = %s", (f"u{n}", n % 10)
            )
            cursor.execute(
                "INSERT INTO t VALUES (%s, 0, 'new') ON DUPLICATE KEY UPDATE v = v + 1",
                (ROWS + n,),
            )
            time.sleep(0.05)


def test_the_embedded_catalog_refuses_a_commit_built_on_metadata_another_process_replaced(
    spark: object,
) -> None:
    """Writer A holds metadata version N of a table; writer B, another process, commits N+1; A's
    commit of its own N+1 on top of N then fails (CommitFailedException: the catalog row no
    longer names N), changing nothing: a compare-and-swap, where the Hadoop catalog's
    check-then-rename can let the later writer replace the earlier one's commit. An Iceberg
    update that reads the table again first (what its own retries do, and what binlake's
    commit retry does) goes on top of B's, both kept."""
    table = f"lake.promise.t{uuid.uuid4().hex[:8]}"
    run = spark.sql  # type: ignore[attr-defined]
    run("CREATE NAMESPACE IF NOT EXISTS lake.promise")
    run(f"CREATE TABLE {table} (id INT) USING iceberg")
    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    session = spark._jsparkSession  # type: ignore[attr-defined]
    operations = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        session, table
    ).operations()
    base = operations.current()  # A's view: version N
    with OtherProcess(lake_warehouse(spark)) as other:
        other.commit(table, "B", "b")
        stale = base.replaceProperties(jvm.java.util.HashMap({"writer": "A"}))
        with pytest.raises(Exception, match=r"CommitFailedException"):
            operations.commit(base, stale)
        assert properties(spark, table)["writer"] == "B"  # A's failed commit changed nothing

        loaded = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(session, table)
        update = loaded.updateProperties()
        other.commit(table, "C", "c")
    update.set("writer", "A").commit()  # reads the table again, then commits on top of C's
    after = properties(spark, table)
    assert (after["writer"], after["b"], after["c"]) == ("A", "1", "1")


#: Its own Spark session on the warehouse argv[1]; runs each line of stdin as a statement and
#: prints "ok" once it committed (a failure ends it, the error on stderr).
_OTHER = """
import sys
from pathlib import Path
from binlake.lake.spark.session import SparkSettings, build_session, stop_session
session = build_session(SparkSettings(app_name="other", warehouse=Path(sys.argv[1])))
for line in sys.stdin:
    session.sql(line).collect()
    print("ok", flush=True)
stop_session(session)
"""


class OtherProcess:
    """Another process with its own Spark session on the embedded catalog (one JVM start for
    the test's commits), committing what ``commit`` asks for, one statement at a time."""

    def __init__(self, warehouse: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", _OTHER, str(warehouse)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=replicate_env(),
        )

    def __enter__(self) -> OtherProcess:
        return self

    def commit(self, table: str, writer: str, key: str) -> None:
        """``writer`` and ``key`` set as table properties, committed by the other process."""
        statement = f"ALTER TABLE {table} SET TBLPROPERTIES ('writer'='{writer}', '{key}'='1')"
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(statement + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        assert answer == "ok\n", self.failure()

    def failure(self) -> str:
        self.process.kill()
        _, err = self.process.communicate(timeout=60)
        return err[-6000:]

    def __exit__(self, *_: object) -> None:
        _, err = self.process.communicate(timeout=240)  # stdin closed: the session stops
        assert self.process.returncode == 0, err[-6000:]


def properties(spark: object, table: str) -> dict[str, str]:
    spark.sql(f"REFRESH TABLE {table}")  # type: ignore[attr-defined]
    rows = spark.sql(f"SHOW TBLPROPERTIES {table}").collect()  # type: ignore[attr-defined]
    return {row["key"]: row["value"] for row in rows}
