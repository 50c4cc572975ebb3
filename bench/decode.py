"""Decoder speed: binlake's row decoding against python-mysql-replication and mariadb-binlog.

Builds a binlog of at least 200k rows in varied shapes (inserts, updates with before and after
images, deletes; integers, strings, decimals, temporal values, blobs) on a sandbox MariaDB, then
in the same run measures:

- binlake: read the file, check every CRC32, decode every row of every rows event (one core),
  compiled and pure Python (``BINLAKE_PURE_PYTHON=1``), each in a subprocess of its own (a build
  that is absent or stale runs pure Python both times: the mode is printed beside each figure);
- python-mysql-replication 1.0.17 decoding the same events from the same server (it has no file
  reader, so it reads them over the replication protocol, as its users do);
- ``mariadb-binlog --verbose FILE > /dev/null`` (C, the reference decoder).

Prints rows/s for each and the ratios. Not a test: nothing is asserted.

    .venv/bin/python bench/decode.py [--rows 200000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from pymysql.cursors import Cursor

from binlake.binlog.rows import RowsEvent, decode_rows
from binlake.binlog.stream import EventStream
from binlake.binlog.tablemap import TableMap
from binlake.compiled import PURE_ENV, describe
from binlake_dev.sandbox import MariaDBSandbox

SCHEMA = [
    """CREATE TABLE bench.orders (
        id BIGINT UNSIGNED PRIMARY KEY, customer INT NOT NULL, status VARCHAR(16),
        total DECIMAL(12,2), placed DATETIME(3), note VARCHAR(200), flags TINYINT)""",
    """CREATE TABLE bench.events (
        id INT PRIMARY KEY, kind ENUM('click','view','buy'), at TIMESTAMP(6) NULL,
        payload TEXT, score DOUBLE, day DATE)""",
]
BATCH = 50  # rows per INSERT statement, as in the reference measurements


def insert_many(cur: Cursor, table: str, row_sql: str, rows: list[tuple[object, ...]]) -> None:
    """One multi-row INSERT, so that the binlog holds many rows per event as in real loads."""
    cur.execute(
        f"INSERT INTO {table} VALUES " + ",".join([row_sql] * len(rows)),
        [v for row in rows for v in row],
    )


def load(sandbox: MariaDBSandbox, rows: int) -> None:
    conn = sandbox.connect(autocommit=False)
    cur = conn.cursor()
    cur.execute("CREATE DATABASE bench")
    for ddl in SCHEMA:
        cur.execute(ddl)
    half = rows // 2
    for start in range(0, half, BATCH):
        ids = range(start, min(start + BATCH, half))
        insert_many(
            cur,
            "bench.orders",
            "(%s,%s,'new',%s,NOW(3),%s,%s)",
            [(i, i % 977, f"{i}.{i % 100:02d}", f"note {i} " * 3, i % 7) for i in ids],
        )
        insert_many(
            cur,
            "bench.events",
            "(%s,'view',NOW(6),%s,%s,CURDATE())",
            [(i, "x" * (i % 300), i / 7) for i in ids],
        )
        conn.commit()
    cur.execute("UPDATE bench.orders SET status='paid', total=total+1 WHERE id % 4 = 0")
    conn.commit()
    cur.execute("DELETE FROM bench.events WHERE id % 4 = 1")
    conn.commit()
    conn.close()


def count_rows_binlake(files: list[Path]) -> tuple[int, float]:
    start = time.perf_counter()
    total = 0
    for path in files:
        tables: dict[int, TableMap] = {}
        for event in EventStream(path.read_bytes()):
            payload = event.payload
            if isinstance(payload, TableMap):
                tables[payload.table_id] = payload
            elif isinstance(payload, RowsEvent):
                total += len(decode_rows(payload, tables[payload.table_id]))
    return total, time.perf_counter() - start


class Decoded(NamedTuple):
    rows: int
    seconds: float
    mode: str  # binlake.compiled.describe() of the process that decoded


def decode_in_subprocess(files: list[Path], *, pure: bool) -> Decoded:
    """``count_rows_binlake`` in a fresh process, compiled modules or (``pure``) not."""
    env = {k: v for k, v in os.environ.items() if k != PURE_ENV}
    if pure:
        env[PURE_ENV] = "1"
    command = [sys.executable, __file__, "--decode-only", *map(str, files)]
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    rows, seconds, mode = out.rstrip("\n").split("\t")
    return Decoded(int(rows), float(seconds), mode)


def count_rows_pymysqlreplication(sandbox: MariaDBSandbox, first_file: str) -> tuple[int, float]:
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    settings = {"host": sandbox.host, "port": sandbox.port, "user": sandbox.user, "passwd": ""}
    start = time.perf_counter()
    stream = BinLogStreamReader(
        connection_settings=settings,
        server_id=4242,
        log_file=first_file,
        log_pos=4,
        resume_stream=True,
        blocking=False,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
    )
    total = 0
    for event in stream:
        total += len(event.rows)
    stream.close()
    return total, time.perf_counter() - start


def time_mariadb_binlog(files: list[Path]) -> float:
    start = time.perf_counter()
    for path in files:
        subprocess.run(
            ["mariadb-binlog", "--verbose", str(path)], stdout=subprocess.DEVNULL, check=True
        )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--decode-only", nargs="+", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.decode_only:  # the child of decode_in_subprocess
        rows, seconds = count_rows_binlake(args.decode_only)
        print(f"{rows}\t{seconds}\t{describe()}")
        return
    base = Path(tempfile.mkdtemp(prefix="binlake-bench-"))
    try:
        with MariaDBSandbox(base, extra_args=["--max-binlog-size=1073741824"]) as sandbox:
            load(sandbox, args.rows)
            sandbox.flush_logs()
            files = [f for f in sandbox.binlog_files()[:-1]]
            size = sum(f.stat().st_size for f in files)
            ours = [decode_in_subprocess(files, pure=pure) for pure in (False, True)]
            ref_rows, ref_s = count_rows_pymysqlreplication(sandbox, files[0].name)
            c_s = time_mariadb_binlog(files)
        report(size, ours, ref_rows, ref_s, c_s)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def report(size: int, ours: list[Decoded], ref_rows: int, ref: float, c_s: float) -> None:
    rows = ours[0].rows
    print(f"binlog: {size / 1e6:.1f} MB, {rows} rows")
    for run in ours:
        print(f"binlake decode:           {run.rows / run.seconds:>10,.0f} rows/s ", end="")
        print(f"({run.seconds:.2f} s, {run.mode})")
    print(
        f"python-mysql-replication: {ref_rows / ref:>10,.0f} rows/s ({ref:.2f} s, {ref_rows} rows)"
    )
    print(f"mariadb-binlog --verbose: {rows / c_s:>10,.0f} rows/s ({c_s:.2f} s)")
    for run in ours:
        speed = run.rows / run.seconds
        print(
            f"{run.mode}: ratio binlake / python-mysql-replication: {speed / (ref_rows / ref):.2f}x"
        )
        print(f"{run.mode}: ratio binlake / mariadb-binlog:           {speed / (rows / c_s):.2f}x")


if __name__ == "__main__":
    main()
