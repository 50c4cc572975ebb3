"""`binlake binlog dump` and `verify` on a real MariaDB's binlogs, run as the user runs them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from binlake_dev.sandbox import MariaDBSandbox

BINLAKE = [sys.executable, "-m", "binlake.cli.main"]


def binlake(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*BINLAKE, *map(str, args)], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture(scope="module")
def workload_binlogs(mariadb: MariaDBSandbox, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the server's binlog folder after a small mixed workload, logs flushed."""
    conn = mariadb.connect(autocommit=False)
    cur = conn.cursor()
    cur.execute("CREATE DATABASE IF NOT EXISTS cmd_shop")
    cur.execute(
        "CREATE TABLE cmd_shop.item (id INT PRIMARY KEY, name VARCHAR(40), price DECIMAL(10,2),"
        " added DATETIME(6), tag ENUM('a','b') NULL)"
    )
    cur.execute(
        "INSERT INTO cmd_shop.item VALUES (1,'pen','1.50','2024-01-02 03:04:05.123456','a'),"
        " (2,'ink ✒','20.00','2024-02-03 00:00:00',NULL)"
    )
    conn.commit()
    cur.execute("UPDATE cmd_shop.item SET price = price * 2 WHERE id = 1")
    cur.execute("DELETE FROM cmd_shop.item WHERE id = 2")
    conn.commit()
    conn.close()
    mariadb.flush_logs()
    copy = tmp_path_factory.mktemp("binlogs")
    for path in [*mariadb.binlog_files(), mariadb.binlog_index_path]:
        shutil.copy2(path, copy / path.name)
    return copy


def server_events(mariadb: MariaDBSandbox, name: str) -> list[tuple[str, int, int, int]]:
    conn = mariadb.connect()
    cur = conn.cursor()
    cur.execute(f"SHOW BINLOG EVENTS IN '{name}'")
    rows = [(str(r[2]), int(r[1]), int(r[4]), int(r[3])) for r in cur.fetchall()]
    conn.close()
    return rows


def closed_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("mariadb-bin.[0-9]*"))[:-1]


def test_dump_json_matches_show_binlog_events_for_every_event(
    mariadb: MariaDBSandbox, workload_binlogs: Path
) -> None:
    for path in closed_files(workload_binlogs):
        result = binlake("binlog", "dump", "--json", path)
        assert result.returncode == 0, result.stderr
        ours = [json.loads(line) for line in result.stdout.splitlines()]
        mine = [(e["type"], e["offset"], e["end_log_pos"], e["server_id"]) for e in ours]
        assert mine == server_events(mariadb, path.name)


def test_dump_rows_shows_the_values_written(workload_binlogs: Path) -> None:
    rows = []
    for path in closed_files(workload_binlogs):
        result = binlake("binlog", "dump", "--json", "--rows", path)
        assert result.returncode == 0, result.stderr
        for line in result.stdout.splitlines():
            event = json.loads(line)
            if event.get("table") == "cmd_shop.item" and "rows" in event:
                rows.extend((event["type"], r) for r in event["rows"])
    assert rows == [
        (
            "Write_rows_v1",
            {
                "after": {
                    "id": 1,
                    "name": "pen",
                    "price": "1.50",
                    "added": "2024-01-02T03:04:05.123456",
                    "tag": "a",
                }
            },
        ),
        (
            "Write_rows_v1",
            {
                "after": {
                    "id": 2,
                    "name": "ink ✒",
                    "price": "20.00",
                    "added": "2024-02-03T00:00:00",
                    "tag": None,
                }
            },
        ),
        (
            "Update_rows_v1",
            {
                "before": {
                    "id": 1,
                    "name": "pen",
                    "price": "1.50",
                    "added": "2024-01-02T03:04:05.123456",
                    "tag": "a",
                },
                "after": {
                    "id": 1,
                    "name": "pen",
                    "price": "3.00",
                    "added": "2024-01-02T03:04:05.123456",
                    "tag": "a",
                },
            },
        ),
        (
            "Delete_rows_v1",
            {
                "before": {
                    "id": 2,
                    "name": "ink ✒",
                    "price": "20.00",
                    "added": "2024-02-03T00:00:00",
                    "tag": None,
                }
            },
        ),
    ]


def test_verify_folder_of_a_live_server_copy_is_clean(workload_binlogs: Path) -> None:
    result = binlake("binlog", "verify", workload_binlogs)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == len(list(workload_binlogs.glob("mariadb-bin.[0-9]*")))
    assert all(line.endswith("OK") for line in lines)
    assert all(str(workload_binlogs) in line for line in lines)  # the copy, not the original


def test_verify_json_reports_counts_and_boundary(workload_binlogs: Path) -> None:
    path = closed_files(workload_binlogs)[-1]
    result = binlake("binlog", "verify", "--json", path)
    report = json.loads(result.stdout)
    assert report["problem"] is None
    assert report["last_good_offset"] == path.stat().st_size
    assert report["transaction_boundary"] == path.stat().st_size
    assert report["transactions"] >= 3
    assert report["in_use"] is False


def test_verify_exit_codes_for_torn_tail_and_corruption(
    workload_binlogs: Path, tmp_path: Path
) -> None:
    source = closed_files(workload_binlogs)[-1]
    data = source.read_bytes()
    torn = tmp_path / "torn.000001"
    torn.write_bytes(data[:-7])
    assert binlake("binlog", "verify", torn).returncode == 1
    corrupt = tmp_path / "corrupt.000001"
    damaged = bytearray(data)
    damaged[len(data) // 2] ^= 0x10
    corrupt.write_bytes(bytes(damaged))
    result = binlake("binlog", "verify", corrupt)
    assert result.returncode == 2
    assert "corruption at offset" in result.stdout
    # A torn tail in a file that is not the newest one given is damage, not a crash's leftover.
    assert binlake("binlog", "verify", torn, source).returncode == 2


def bad_input(folder: Path, kind: str) -> Path:
    contents = {"foreign.txt": b"hello", "empty.bin": b""}
    if kind in contents:
        (folder / kind).write_bytes(contents[kind])
    return folder / kind if kind != "." else folder


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("missing.000001", "cannot open"),
        (".", "has no .index file"),
        ("foreign.txt", "not the binlog"),
        ("empty.bin", "shorter than"),
    ],
    ids=["missing-file", "folder-without-index", "foreign-file", "empty-file"],
)
def test_bad_input_to_dump_is_a_typed_error_with_hint_and_no_traceback(
    tmp_path: Path, kind: str, expected: str
) -> None:
    path = bad_input(tmp_path, kind)
    result = binlake("binlog", "dump", path)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("error: ") and expected in lines[0]
    assert lines[1].startswith("hint: ")
