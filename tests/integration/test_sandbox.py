"""The MariaDB sandbox really runs a server in the binlog mode binlake expects."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable

import pytest

from binlake_dev.sandbox import MariaDBSandbox

EXPECTED_SETTINGS = {
    "log_bin": "ON",
    "binlog_format": "ROW",
    "binlog_row_image": "FULL",
    "binlog_row_metadata": "FULL",
    "binlog_checksum": "CRC32",
    "character_set_server": "utf8mb4",
    "server_id": "1",
}


def process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def own_sandbox(sandbox_factory: Callable[..., MariaDBSandbox]) -> MariaDBSandbox:
    """A private, started server for tests that crash or stop it."""
    return sandbox_factory(server_id=2).start()


def test_server_runs_in_row_full_full_crc32_mode(mariadb: MariaDBSandbox) -> None:
    names = ", ".join(f"'{name}'" for name in EXPECTED_SETTINGS)
    rows = mariadb.execute(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({names})")
    assert dict(rows) == EXPECTED_SETTINGS


def test_root_logs_in_over_tcp_without_a_database(mariadb: MariaDBSandbox) -> None:
    ((user, database),) = mariadb.execute("SELECT CURRENT_USER(), DATABASE()")
    assert user == "root@127.0.0.1"
    assert database is None


def test_committed_insert_appears_in_a_binlog_file_the_index_lists(
    mariadb: MariaDBSandbox, fresh_database: str
) -> None:
    marker = f"marker-{uuid.uuid4().hex}"
    table_sql = "CREATE TABLE item (id INT PRIMARY KEY, label VARCHAR(64))"
    mariadb.execute(table_sql, database=fresh_database)
    with mariadb.connect(fresh_database, autocommit=False) as connection:
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO item VALUES (1, %s)", (marker,))
        connection.commit()
    files = mariadb.flush_logs()
    assert files, "the binlog index lists no file"
    assert all(path.is_absolute() and path.parent == mariadb.binlog_dir for path in files)
    holding = [path for path in files if marker.encode() in path.read_bytes()]
    assert len(holding) == 1
    assert holding[0] != files[-1], "FLUSH BINARY LOGS should have rotated past the insert"


def test_kill_then_start_keeps_committed_data(own_sandbox: MariaDBSandbox) -> None:
    own_sandbox.execute("CREATE DATABASE shop")
    own_sandbox.execute("CREATE TABLE shop.item (id INT PRIMARY KEY, label VARCHAR(20))")
    own_sandbox.execute("INSERT INTO shop.item VALUES (1, 'one'), (2, 'two'), (3, 'three')")
    files_before = own_sandbox.binlog_files()
    crashed_pid = own_sandbox.pid
    assert crashed_pid is not None

    own_sandbox.kill()
    assert not process_exists(crashed_pid)
    own_sandbox.start()

    assert own_sandbox.execute("SELECT id, label FROM shop.item ORDER BY id") == (
        (1, "one"),
        (2, "two"),
        (3, "three"),
    )
    files_after = own_sandbox.binlog_files()
    assert files_after[: len(files_before)] == files_before
    assert len(files_after) == len(files_before) + 1  # a restart opens a new binlog file


def test_stop_leaves_no_process(own_sandbox: MariaDBSandbox) -> None:
    pid = own_sandbox.pid
    assert pid is not None and process_exists(pid)
    own_sandbox.stop()
    assert not process_exists(pid)
    assert not own_sandbox.is_running
    assert "Shutdown complete" in own_sandbox.log_path.read_text()


def test_restart_keeps_port_and_data(own_sandbox: MariaDBSandbox) -> None:
    own_sandbox.execute("CREATE DATABASE kept")
    port = own_sandbox.port
    own_sandbox.restart()
    assert own_sandbox.port == port
    assert own_sandbox.execute("SHOW DATABASES LIKE 'kept'") == (("kept",),)
