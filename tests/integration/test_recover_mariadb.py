"""Offline recovery of a real MariaDB's binlog folder after kill -9, and of real binlogs cut short.

A private server is loaded from another thread and killed with SIGKILL mid-load; its binlog files
and index are copied and `binlake binlog recover` (the CLI, as a subprocess) repairs the copy.
The index lines are absolute paths into the original datadir: the originals must stay untouched.
Then a real binlog is cut at random offsets and in each of WL#5493's four torn-tail shapes, and
recovery must trim to exactly the last transaction boundary before the damage.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pymysql
import pytest

from binlake.binlog.constants import HEADER_LEN, EventType
from binlake.storage.binlog_file import BinlogFileReader
from binlake.storage.recovery import recover_log
from binlake_dev.sandbox import MariaDBSandbox
from conftest import require_mariadb
from relay_testing import check_recovered_log, folder_hashes, set_in_use

BASENAME = "mariadb-bin"
MIN_LOAD_SECONDS = 1.0
MAX_LOAD_SECONDS = 20.0  # load until the binlog has rotated twice, at most this long


def load_until(sandbox: MariaDBSandbox, stop: threading.Event) -> None:
    """Multi-statement transactions as fast as possible until ``stop`` (or the server dies)."""
    try:
        with sandbox.connect(autocommit=False) as conn, conn.cursor() as cur:
            cur.execute("CREATE DATABASE IF NOT EXISTS shop")
            cur.execute(
                "CREATE TABLE IF NOT EXISTS shop.t (id INT AUTO_INCREMENT PRIMARY KEY, "
                "v VARCHAR(200), n INT)"
            )
            conn.commit()
            i = 0
            while not stop.is_set():
                i += 1
                cur.executemany(
                    "INSERT INTO shop.t (v, n) VALUES (%s, %s)",
                    [(f"row {i}-{k} " + "x" * (i % 150), i) for k in range(3)],
                )
                cur.execute("UPDATE shop.t SET n = n + 1 WHERE id = %s", (i,))
                conn.commit()
    except (pymysql.Error, OSError):
        return  # the server was killed under us: that is the point


@dataclass
class Crashed:
    datadir: Path
    copy: Path
    original_hashes: dict[str, str]


def binlog_names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(f"{BASENAME}."))


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Crashed]:
    require_mariadb()
    sandbox = MariaDBSandbox(
        tmp_path_factory.mktemp("crashed"), server_id=7, extra_args=["--max-binlog-size=262144"]
    )
    try:
        sandbox.start()
        stop = threading.Event()
        loader = threading.Thread(target=load_until, args=(sandbox, stop))
        loader.start()
        deadline = time.monotonic() + MAX_LOAD_SECONDS
        time.sleep(MIN_LOAD_SECONDS)
        while len(sandbox.binlog_files()) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert loader.is_alive(), "the load stopped before the kill"
        sandbox.kill()  # SIGKILL mid-load
        stop.set()
        loader.join(10)
    finally:
        sandbox.kill()
    copy = tmp_path_factory.mktemp("copy")
    for name in binlog_names(sandbox.datadir):
        shutil.copy2(sandbox.datadir / name, copy / name)
    originals = {
        n: h for n, h in folder_hashes(sandbox.datadir).items() if n.startswith(f"{BASENAME}.")
    }
    yield Crashed(sandbox.datadir, copy, originals)


def run_recover_cli(folder: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "binlake.cli.main", "binlog", "recover", str(folder), *extra],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_cli_recovers_a_copy_of_a_server_killed_mid_load(crashed: Crashed) -> None:
    files = [n for n in binlog_names(crashed.copy) if n[len(BASENAME) + 1 :].isdigit()]
    assert len(files) >= 2, "the load should have rotated the binlog at least once"
    dry = run_recover_cli(crashed.copy, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would clear the IN_USE flag" in dry.stdout
    done = run_recover_cli(crashed.copy)
    assert done.returncode == 0, done.stderr
    assert f"{files[-1]}: clean; IN_USE flag cleared" in done.stdout or "trimmed" in done.stdout
    assert "using the files of the same names in" in done.stdout  # absolute lines, copied folder
    scans = check_recovered_log(crashed.copy, BASENAME)
    assert sum(s.transactions for s in scans) > 100
    for name in files:
        listing = subprocess.run(
            ["mariadb-binlog", str(crashed.copy / name)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert listing.returncode == 0 and "ERROR" not in listing.stderr, listing.stderr
        assert "not closed properly" not in listing.stdout
    original = {
        n: h for n, h in folder_hashes(crashed.datadir).items() if n in crashed.original_hashes
    }
    assert original == crashed.original_hashes, "recovery touched the original datadir"
    again = run_recover_cli(crashed.copy)
    assert again.stdout.splitlines()[-1] == f"{files[-1]}: clean"


# ---- cutting a real binlog --------------------------------------------------------------


@dataclass
class RealLog:
    data: bytes
    group_ends: list[int]
    #: (start, end, type) of every event.
    events: list[tuple[int, int, int]]

    def boundary_at_or_before(self, offset: int) -> int:
        return max(end for end in self.group_ends if end <= offset)


@pytest.fixture(scope="module")
def real_log(crashed: Crashed) -> RealLog:
    """The biggest binlog of the crashed server, as a clean, whole file."""
    files = [crashed.datadir / n for n in binlog_names(crashed.datadir) if n[-6:].isdigit()]
    path = max(files, key=lambda p: p.stat().st_size)
    with path.open("rb") as f, BinlogFileReader(f, path.name) as reader:
        groups = list(reader.groups())
        data = bytes(reader.buf)
    ends = [g.end_offset for g in groups]
    events = [(e.offset, e.end_offset, e.header.type_code) for g in groups for e in g.events]
    assert len([g for g in groups if g.is_transaction]) > 50
    return RealLog(data[: ends[-1]], ends, events)


def recover_cut(folder: Path, content: bytes) -> bytes:
    folder.mkdir()
    path = folder / f"{BASENAME}.000001"
    path.write_bytes(content)
    set_in_use(path)
    (folder / f"{BASENAME}.index").write_text(f"./{BASENAME}.000001\n")
    recover_log(folder)
    check_recovered_log(folder, BASENAME)
    return path.read_bytes()


def test_random_cuts_of_a_real_binlog_trim_to_the_last_boundary(
    real_log: RealLog, tmp_path: Path
) -> None:
    rng = random.Random(5493)
    fde_end = real_log.events[0][1]
    for i in range(25):
        cut = rng.randrange(fde_end, len(real_log.data))
        result = recover_cut(tmp_path / f"cut{i}", real_log.data[:cut])
        assert len(result) == real_log.boundary_at_or_before(cut), cut
        assert result == real_log.data[: len(result)]


def rows_event_in_the_middle(log: RealLog) -> tuple[int, int]:
    rows = [(s, e) for s, e, t in log.events if t == EventType.WRITE_ROWS_V1]
    return rows[len(rows) // 2]


def torn(log: RealLog, shape: str) -> tuple[bytes, int]:
    """The log cut inside a rows event in ``shape``; and where the damaged event starts."""
    start, end = rows_event_in_the_middle(log)
    data = log.data
    shapes = {
        "header_partial": data[: start + 11],
        "header_garbage": data[:start] + b"\x33" * HEADER_LEN + data[start + HEADER_LEN : end],
        "body_partial": data[: start + HEADER_LEN + (end - start - HEADER_LEN) // 2],
        "body_garbage": data[: start + HEADER_LEN] + b"\x33" * (end - start - HEADER_LEN),
    }
    return shapes[shape], start


@pytest.mark.parametrize(
    "shape", ["header_partial", "header_garbage", "body_partial", "body_garbage"]
)
def test_each_torn_tail_shape_of_a_real_binlog_is_trimmed_to_its_boundary(
    real_log: RealLog, tmp_path: Path, shape: str
) -> None:
    content, damaged_at = torn(real_log, shape)
    result = recover_cut(tmp_path / "log", content)
    assert result == real_log.data[: real_log.boundary_at_or_before(damaged_at)]
    listing = subprocess.run(
        ["mariadb-binlog", str(tmp_path / "log" / f"{BASENAME}.000001")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert listing.returncode == 0, listing.stderr


def test_crc_mismatch_inside_the_last_transaction_of_a_real_binlog_is_trimmed(
    real_log: RealLog, tmp_path: Path
) -> None:
    start, _end = rows_event_in_the_middle(real_log)
    boundary = real_log.boundary_at_or_before(start)
    tx_end = min(e for e in real_log.group_ends if e > start)
    damaged = bytearray(real_log.data[:tx_end])
    damaged[start + HEADER_LEN + 3] ^= 0x08
    result = recover_cut(tmp_path / "log", bytes(damaged))
    assert result == real_log.data[:boundary]
