"""Iceberg's JDBC catalog on PostgreSQL as binlake's target: every way its database can be
wrong or gone is a typed error with a hint (never a Java stack trace), a database that stops
while `binlake replicate` runs is ridden out with backoff and loses nothing, `check-target`
names each check, and the password never reaches a command line.

The replication tests themselves run on this catalog too (parametrised: test_replicate.py,
test_snapshot.py, test_status.py, test_verify.py, crash/test_applier_crash.py)."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from binlake.config import Secret
from binlake.errors import (
    CatalogAuthError,
    CatalogConfigError,
    CatalogError,
    CatalogUnreachableError,
)
from binlake.lake.catalog.jdbc import JdbcCatalogReader
from binlake.lake.catalog.target import LakeTarget, jdbc_catalog_conf
from binlake.lake.spark.target_check import probe_catalog
from binlake_dev.postgres import PostgresServer, free_port
from binlake_dev.sandbox import MariaDBSandbox
from conftest import require_postgres
from lake_builder import isolated_catalog
from lake_targets import (
    CatalogDatabase,
    assert_no_java,
    catalog_database,
    jdbc_target,
    register_jdbc_catalog,
)
from replicate_testing import (
    applied_offset,
    assert_history_is_exactly_once,
    assert_verify_passes,
    binlake_command,
    config_for,
    describe,
    module_source,
    replicate_command,
    replicate_env,
    run_replicate,
)

source = module_source("jdbc-catalog-source")


#: What no message a user sees may hold: a Java stack frame, a Java exception's class.
def broken(target: LakeTarget, spark: SparkSession, name: str, **change: object) -> LakeTarget:
    """``target``'s catalog under a new ``name`` with ``change`` made to its [catalog]."""
    assert target.jdbc is not None
    config = replace(target.jdbc, **change)  # type: ignore[arg-type]
    conf = jdbc_catalog_conf(name, config)
    bad = replace(target, catalog=name, spark_conf=conf, jdbc=config)
    for key, value in {**conf, **{k: v.reveal_text() for k, v in bad.secret_conf.items()}}.items():
        spark.conf.set(key, value)
    return bad


@pytest.fixture(scope="module")
def good(
    spark: SparkSession, catalog_db: CatalogDatabase, tmp_path_factory: pytest.TempPathFactory
) -> LakeTarget:
    return register_jdbc_catalog(spark, catalog_db, "jgood", tmp_path_factory.mktemp("jgood"))


CASES = {
    "wrong password": ({"password": Secret("not-the-password")}, CatalogAuthError),
    "unknown database": ({"uri": "/nosuchdb"}, CatalogConfigError),
    "no driver for the uri": ({"uri": "jdbc:postgres:"}, CatalogConfigError),
    "nothing listening": ({"uri": "port"}, CatalogUnreachableError),
}


def changed(target: LakeTarget, change: dict[str, object]) -> dict[str, object]:
    """A case's change, made concrete for the session's catalog database."""
    assert target.jdbc is not None and target.jdbc.uri is not None
    uri = target.jdbc.uri
    if change.get("uri") == "/nosuchdb":
        return {"uri": uri.rsplit("/", 1)[0] + "/nosuchdb"}
    if change.get("uri") == "jdbc:postgres:":
        return {"uri": uri.replace("jdbc:postgresql:", "jdbc:postgres:")}
    if change.get("uri") == "port":
        return {"uri": f"jdbc:postgresql://127.0.0.1:{free_port()}/lake"}
    return change


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_wrong_or_unreachable_catalog_database_is_a_typed_error_through_spark_and_without(
    spark: SparkSession, good: LakeTarget, catalog_db: CatalogDatabase, case: str
) -> None:
    """The same failure, met by the applier's Spark session (Iceberg, pgjdbc) and by status's
    and verify's direct reader (pg8000), is the same typed error; neither message holds Java
    text or the password."""
    change, expected = CASES[case]
    name = "jbad_" + case.replace(" ", "_")
    bad = broken(good, spark, name, **changed(good, change))
    with pytest.raises(CatalogError) as through_spark:
        probe_catalog(spark, bad)
    errors: list[CatalogError] = [through_spark.value]
    reader = JdbcCatalogReader.for_target(bad)
    if reader is not None:  # a uri pg8000 reads (not the driver typo)
        with pytest.raises(CatalogError) as direct:
            reader.tables()
        errors.append(direct.value)
    for error in errors:
        assert type(error) is expected, f"{type(error).__name__}: {error}"
        assert error.catalog == name and error.hint
        text = f"{error} {error.hint} {error.fields()}"
        assert catalog_db.password not in text and "not-the-password" not in text
        assert_no_java(str(error))
    assert errors[0].exit_code == {
        CatalogAuthError: 77, CatalogConfigError: 78, CatalogUnreachableError: 69
    }[expected]  # fmt: skip


def test_the_catalog_check_of_a_new_embedded_warehouse_creates_its_folder(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A Hadoop catalog lists its warehouse folder: before the first table there is none, and
    `SHOW NAMESPACES` would fail (a first `binlake replicate` on a new warehouse)."""
    target = isolated_catalog(spark, tmp_path / "unused")
    fresh = replace(target, warehouse=tmp_path / "new" / "warehouse")
    spark.conf.set(f"spark.sql.catalog.{target.catalog}.warehouse", str(fresh.warehouse))
    assert "answers (0 namespace(s))" in probe_catalog(spark, fresh)
    assert fresh.warehouse.is_dir()


def test_replicate_with_a_wrong_catalog_password_stops_with_the_auth_error_and_exit_77(
    tmp_path: Path, source: MariaDBSandbox, spark: SparkSession, catalog_db: CatalogDatabase
) -> None:
    database = "jdbc_badpw"
    source.execute(f"CREATE DATABASE {database}")
    source.execute(f"CREATE TABLE {database}.t (id INT PRIMARY KEY)")
    wrong = replace(catalog_db, password_file=tmp_path / "wrong-password")
    wrong.password_file.write_text("not-the-password\n")
    target = jdbc_target(wrong, tmp_path / "warehouse")
    config = config_for(tmp_path, source, spark, database, target=target)
    run = run_replicate(config, "--until-caught-up")
    assert run.returncode == 77, describe(run)
    error = run.stderr.split("error: ", 1)[1]
    assert "refused the login" in error and "password authentication failed" in error
    assert "hint: check [catalog] user and its password" in run.stderr
    assert_no_java(error)
    assert "not-the-password" not in run.stderr + run.stdout


def test_check_target_names_each_check_and_the_password_never_reaches_a_command_line(
    tmp_path: Path, source: MariaDBSandbox, spark: SparkSession, catalog_db: CatalogDatabase
) -> None:
    """Everything set on Spark's session builder lands on the driver JVM's command line (`ps`
    shows it to every user of the host): binlake sets the password after the session
    started. Every process's command line is read while `binlake check-target` runs."""
    target = jdbc_target(catalog_db, tmp_path / "warehouse")
    config = config_for(tmp_path, source, spark, "jdbc_check", target=target)
    process = subprocess.Popen(
        binlake_command("check-target", config),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=replicate_env(),
    )  # fmt: skip
    seen_driver = False
    secret = catalog_db.password.encode()
    while process.poll() is None:
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                raw = cmdline.read_bytes()
            except OSError:
                continue
            assert secret not in raw, f"the password is on the command line of {cmdline}"
            seen_driver = seen_driver or b"spark.app.name=binlake-check-target" in raw
        time.sleep(0.05)
    out, err = process.communicate()
    assert process.returncode == 0, out + err
    assert seen_driver, "the driver JVM's command line was never seen"
    lines = out.splitlines()
    for check in ("master", "session", "catalog", "namespace jdbc_check", "warehouse"):
        assert any(line.startswith(f"ok: {check}: ") for line in lines), (check, out)
    assert "a table was created, written and dropped there" in out
    assert lines[-1] == "target: ready"
    assert catalog_db.password not in out + err


class Orders:
    """Transactions that each touch a keyed table (insert, then update an older row) and a
    key-less log (a change log: a batch applied twice would show there)."""

    def __init__(self, source: MariaDBSandbox, database: str) -> None:
        self.source, self.database, self.next = source, database, 1
        self.errors: list[BaseException] = []
        source.execute(f"CREATE DATABASE {database}")
        source.execute(f"CREATE TABLE {database}.orders (id INT PRIMARY KEY, total INT)")
        source.execute(f"CREATE TABLE {database}.audit (at INT, what VARCHAR(10))")

    def run(self, transactions: int, pause_s: float = 0.0) -> None:
        connection = self.source.connect(self.database, autocommit=False)
        with connection as conn, conn.cursor() as cursor:
            for _ in range(transactions):
                order, self.next = self.next, self.next + 1
                cursor.execute("INSERT INTO orders VALUES (%s, %s)", (order, order))
                cursor.execute("UPDATE orders SET total = total + 1 WHERE id = %s", (order // 2,))
                cursor.execute("INSERT INTO audit VALUES (%s, 'order')", (order,))
                conn.commit()
                time.sleep(pause_s)

    def in_thread(self, transactions: int, pause_s: float) -> threading.Thread:
        def work() -> None:
            try:
                self.run(transactions, pause_s)
            except BaseException as error:  # raised by the test
                self.errors.append(error)

        thread = threading.Thread(target=work)
        thread.start()
        return thread


def test_a_catalog_database_down_at_start_then_stopped_mid_run_loses_nothing(
    tmp_path: Path, source: MariaDBSandbox, spark: SparkSession
) -> None:
    """PostgreSQL down when replicate starts: exit 69 with the hint, quickly. Up again, and
    stopped (fast shutdown: its sessions are ended) for a few seconds while a live workload
    is applied: the batch that met it is retried with backoff after every table's position
    was read again from the catalog; nothing is lost, nothing doubled."""
    require_postgres()
    with PostgresServer() as server:
        database_info = catalog_database(server, tmp_path)
        register_jdbc_catalog(spark, database_info, "pgdown", tmp_path / "warehouse")
        target = jdbc_target(database_info, tmp_path / "warehouse", catalog="pgdown")
        database = "jdbc_down"
        workload = Orders(source, database)
        workload.run(10)
        config = config_for(
            tmp_path, source, spark, database, target=target,
            applier="max_transactions = 4\ncatalog_give_up_s = 120\n",
        )  # fmt: skip
        server.stop()
        started = time.monotonic()
        down = run_replicate(config, "--until-caught-up")
        assert down.returncode == 69, describe(down)
        assert "error: " in down.stderr and "cannot be reached" in down.stderr, describe(down)
        assert "hint: " in down.stderr
        assert_no_java(down.stderr.split("error: ", 1)[1])
        assert time.monotonic() - started < 120

        server.start()
        log_path = tmp_path / "replicate.log"
        with log_path.open("w") as log:
            process = subprocess.Popen(
                replicate_command(config), stdout=log, stderr=subprocess.STDOUT, text=True,
                env=replicate_env(),
            )  # fmt: skip
        try:
            live = workload.in_thread(40, pause_s=0.1)
            deadline = time.monotonic() + 180
            while applied_offset(config, (database, "orders")) == 0:
                assert process.poll() is None, log_path.read_text()
                assert time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.2)
            server.stop()
            time.sleep(4)
            server.start()
            live.join()
            assert not workload.errors, workload.errors
            end = int(source.execute("SHOW MASTER STATUS")[0][1])
            while applied_offset(config, (database, "audit")) < end:
                assert process.poll() is None, log_path.read_text()
                assert time.monotonic() < deadline + 120, log_path.read_text()
                time.sleep(0.3)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(120)
        output = log_path.read_text()
        assert process.returncode == 0, output
        assert "catalog failed: " in output and "catalog answers again" in output, output
        ours = [line for line in output.splitlines() if line.startswith(("apply:", "error:"))]
        assert_no_java("\n".join(ours))
        assert_verify_passes(config, spark)
        assert_history_is_exactly_once(config, spark)
