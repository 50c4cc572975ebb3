"""Replication users whose passwords are not ASCII (issue 17), on a real MariaDB, under both
auth plugins it offers here (``mysql_native_password`` and ``ed25519``), and the empty
password: every command connects (check-source, replicate with its snapshot reads, verify,
status), and the password shows nowhere (output, state files, metrics, the Spark conf)."""

from __future__ import annotations

import io
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from binlake.apply.replicate import Replicator
from binlake.binlog.names import TableName
from binlake.config import load_config
from binlake.console import Console
from binlake.lake.catalog.target import lake_target
from binlake.lake.spark.session import spark_settings, startup_conf
from binlake_dev.sandbox import MariaDBSandbox
from conftest import require_mariadb
from replicate_testing import binlake_command, config_for, replicate_env

NON_ASCII = "pässwörd-ü €ß"
PASSWORD_ENV = "TEST_BINLAKE_SOURCE_PASSWORD"
PLUGINS = ("mysql_native_password", "ed25519")
GRANTS = "REPLICATION SLAVE, BINLOG MONITOR, SELECT"


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBSandbox]:
    require_mariadb()
    sandbox = MariaDBSandbox(tmp_path_factory.mktemp("password-source"))
    try:
        sandbox.start()
        sandbox.execute("INSTALL SONAME 'auth_ed25519'")
        yield sandbox
    finally:
        sandbox.kill()


def create_user(source: MariaDBSandbox, plugin: str, password: str) -> str:
    """A user with binlake's grants, created without binlogging it (the relay log copies the
    source's binlog verbatim, and a CREATE USER statement there would hold the password)."""
    user = f"u_{uuid.uuid4().hex[:8]}"
    if plugin == "ed25519":
        create = f"CREATE USER {user}@'%%' IDENTIFIED VIA ed25519 USING PASSWORD(%s)"
    else:
        create = f"CREATE USER {user}@'%%' IDENTIFIED BY %s"
    with source.connect() as connection, connection.cursor() as cursor:
        cursor.execute("SET SESSION sql_log_bin = 0")
        cursor.execute(create, (password,))
        cursor.execute(f"GRANT {GRANTS} ON *.* TO {user}@'%'")
    return user


def with_user(config: Path, user: str, password_line: str) -> Path:
    text = config.read_text("utf-8")
    config.write_text(
        text.replace('user = "root"\n', f'user = "{user}"\n{password_line}\n'), "utf-8"
    )
    return config


def run_cli(
    command: str, config: Path, *args: str, password: str
) -> subprocess.CompletedProcess[str]:
    env = {**replicate_env(), PASSWORD_ENV: password}
    return subprocess.run(
        binlake_command(command, config, *args),
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )


def assert_not_shown(password: str, *texts: str) -> None:
    for text in texts:
        assert password not in text


def assert_not_in_files(password: str, folder: Path) -> None:
    needle = password.encode("utf-8")
    for path in folder.rglob("*"):
        if path.is_file():
            assert needle not in path.read_bytes(), path


@pytest.mark.parametrize("plugin", PLUGINS)
@pytest.mark.parametrize("origin", ["password_env", "password_file"])
def test_check_source_logs_in_with_a_non_ascii_password(
    source: MariaDBSandbox, spark: object, tmp_path: Path, plugin: str, origin: str
) -> None:
    user = create_user(source, plugin, NON_ASCII)
    (tmp_path / "pw").write_bytes(NON_ASCII.encode("utf-8") + b"\n")
    line = (
        f'password_env = "{PASSWORD_ENV}"' if origin == "password_env" else 'password_file = "pw"'
    )
    config = with_user(config_for(tmp_path, source, spark, "nothing"), user, line)
    run = run_cli("check-source", config, password=NON_ASCII)
    assert run.returncode == 0, run.stderr
    assert_not_shown(NON_ASCII, run.stdout, run.stderr)


@pytest.mark.parametrize("plugin", PLUGINS)
def test_the_same_password_in_another_encoding_is_refused_without_showing_it(
    source: MariaDBSandbox, spark: object, tmp_path: Path, plugin: str
) -> None:
    """The file's bytes are used as they are: latin-1 bytes are not the UTF-8 ones."""
    user = create_user(source, plugin, NON_ASCII)
    latin1 = NON_ASCII.replace("€", "E").encode("latin-1")
    (tmp_path / "pw").write_bytes(latin1)
    config = with_user(config_for(tmp_path, source, spark, "nothing"), user, 'password_file = "pw"')
    run = run_cli("check-source", config, password="")
    assert run.returncode == 77, run.stderr
    assert "password_file" in run.stderr and "Traceback" not in run.stderr
    assert latin1.decode("latin-1") not in run.stderr + run.stdout


def test_an_empty_password_logs_in(source: MariaDBSandbox, spark: object, tmp_path: Path) -> None:
    user = create_user(source, "mysql_native_password", "")
    for line in (f'password_env = "{PASSWORD_ENV}"', ""):
        config = with_user(config_for(tmp_path, source, spark, "nothing"), user, line)
        run = run_cli("check-source", config, password="")
        assert run.returncode == 0, (line, run.stderr)


def test_an_empty_ed25519_password_is_refused_by_the_server_as_for_its_own_client(
    source: MariaDBSandbox, spark: object, tmp_path: Path
) -> None:
    """MariaDB stores an empty authentication string for ``ed25519 USING PASSWORD('')`` and
    then refuses every login to it, its own ``mariadb`` client's too: binlake reports the
    refusal as a typed error, as for a wrong password."""
    user = create_user(source, "ed25519", "")
    client = subprocess.run(
        [
            "mariadb",
            "-h",
            source.host,
            "-P",
            str(source.port),
            "-u",
            user,
            "--password=",
            "-e",
            "SELECT 1",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert client.returncode != 0 and "Access denied" in client.stderr
    config = with_user(config_for(tmp_path, source, spark, "nothing"), user, "")
    run = run_cli("check-source", config, password="")
    assert run.returncode == 77, run.stderr
    assert "hint:" in run.stderr and "Traceback" not in run.stderr


def test_replicate_snapshot_verify_and_status_connect_with_a_non_ascii_ed25519_password(
    source: MariaDBSandbox, spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = create_user(source, "ed25519", NON_ASCII)
    database = f"pw_{uuid.uuid4().hex[:8]}"
    source.execute(f"CREATE DATABASE {database}")
    source.execute(f"CREATE TABLE {database}.t (id INT PRIMARY KEY, v VARCHAR(20))")
    source.execute(f"INSERT INTO {database}.t VALUES (1, 'before the snapshot')")
    config = config_for(tmp_path, source, spark, database, snapshot="initial = true\n")
    # The snapshot's chunk tasks read the password on the executor. An environment variable
    # set now would not reach the Python workers of the tests' shared Spark session (they
    # inherit the environment the JVM started with; a `binlake replicate` process has it from
    # its start): the file reaches them.
    password_file = tmp_path / "source-password"
    password_file.write_bytes(NON_ASCII.encode("utf-8") + b"\n")
    config = with_user(config, user, f'password_file = "{password_file}"')
    monkeypatch.setenv(PASSWORD_ENV, NON_ASCII)
    loaded = load_config(config)
    stream = io.StringIO()
    replicator = Replicator(
        loaded,
        until_caught_up=True,
        spark=spark,  # type: ignore[arg-type]
        console=Console(stream, interval_s=5.0, live=False),
    )
    source.execute(f"INSERT INTO {database}.t VALUES (2, 'streamed')")
    result = replicator.run()
    assert result.received is not None and result.received.transactions > 0
    lake_table = lake_target(loaded).lake_table(TableName(database, "t"))
    rows = spark.sql(f"SELECT id FROM {lake_table} ORDER BY id").collect()  # type: ignore[attr-defined]
    assert [row["id"] for row in rows] == [1, 2]  # copied by the snapshot's reads
    verify = run_cli("verify", config, password=NON_ASCII)
    status = run_cli("status", config, "--json", password=NON_ASCII)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert status.returncode == 0, status.stderr
    assert '"reachable": true' in status.stdout
    conf = startup_conf(spark_settings(lake_target(loaded)))
    spark_conf = dict(spark.sparkContext.getConf().getAll())  # type: ignore[attr-defined]
    assert_not_shown(
        NON_ASCII,
        stream.getvalue(),
        replicator.metrics.render(),
        verify.stdout + verify.stderr,
        status.stdout + status.stderr,
        repr(conf),
        repr(spark_conf),
        repr(loaded),
    )
    assert_not_in_files(NON_ASCII, loaded.state.dir)
    assert os.environ[PASSWORD_ENV] == NON_ASCII
