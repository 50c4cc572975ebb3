"""Decoder speed: binlake's row decoding against python-mysql-replication and mariadb-binlog.

Builds a binlog of at least 200k rows in varied shapes (inserts, updates with before and after
images, deletes; integers, strings, decimals, temporal values, blobs) on a sandbox MariaDB, then
in the same run measures:

- binlake: read the file (mapped, as binlake's file reader does), check every CRC32, decode
  every row of every rows event (one core),
  compiled and pure Python (``BINLAKE_PURE_PYTHON=1``), each in a subprocess of its own (a build
  that is absent or stale runs pure Python both times: the mode is printed beside each figure);
- python-mysql-replication 1.0.17 decoding the same events from the same server (it has no file
  reader, so it reads them over the replication protocol, as its users do);
- ``mariadb-binlog --verbose FILE > /dev/null`` (C, the reference decoder).

Prints rows/s for each and the ratios. Not a test: nothing is asserted.

With ``--dump``, the same binlog is measured instead as a user meets it, whole commands in
subprocesses with stdout to /dev/null, best of ``--repeats``: ``binlake binlog dump --rows`` and
``--rows --json``, compiled and pure Python, against ``mariadb-binlog --verbose``; and the
start-up of each alone (the same commands on a binlog of its header only), so the figure can be
taken apart. Prints seconds (wall, and the CPU of the child), and the ratios (the C tool's time
over binlake's: 1.0x is as fast).

    .venv/bin/python bench/decode.py [--rows 200000]
    .venv/bin/python bench/decode.py --dump [--rows 200000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from pymysql.cursors import Cursor

from binlake.binlog.rows import RowsEvent, decode_rows
from binlake.binlog.tablemap import TableMap
from binlake.compiled import PURE_ENV, describe
from binlake.storage.binlog_file import BinlogFileReader
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
    """Every row of ``files`` decoded, each file read as binlake reads one (``BinlogFileReader``
    maps it: ``binlake binlog dump``'s reader), every event's CRC32 checked."""
    start = time.perf_counter()
    total = 0
    for path in files:
        tables: dict[int, TableMap] = {}
        with path.open("rb") as file, BinlogFileReader(file, path.name) as reader:
            for event in reader.events():
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


class Timed(NamedTuple):
    wall: float  # seconds, best of the repeats
    cpu: float  # user and system seconds of the child, in the run of the best wall time


def time_command(command: list[str], repeats: int, env: dict[str, str] | None = None) -> Timed:
    """The best of ``repeats`` runs of ``command``, stdout to /dev/null."""
    runs = []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, env=env, check=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        runs.append(Timed(wall, cpu))
    return min(runs)


def header_only(path: Path, into: Path) -> Path:
    """A copy of binlog ``path`` cut after its FORMAT_DESCRIPTION event: a dump's start-up."""
    data = path.read_bytes()
    fde_size = int.from_bytes(data[4 + 9 : 4 + 13], "little")
    into.write_bytes(data[: 4 + fde_size])
    return into


def binlake_command() -> list[str]:
    """The ``binlake`` console script beside this Python, as a user runs it."""
    script = Path(sys.executable).with_name("binlake")
    return [str(script)] if script.exists() else [sys.executable, "-m", "binlake.cli.main"]


def binlake_mode(env: dict[str, str]) -> str:
    out = subprocess.run([*binlake_command(), "--version"], env=env, capture_output=True, text=True)
    return out.stdout.strip().partition(", ")[2]


def show(name: str, timed: Timed, note: str = "") -> None:
    print(f"{name + ':':<37} {timed.wall:6.2f} s (cpu {timed.cpu:.2f}{note})")


def time_dump_commands(files: list[Path], tiny: Path, repeats: int) -> None:
    """The ``--dump`` section: whole commands against ``mariadb-binlog --verbose``."""
    c_tool = ["mariadb-binlog", "--verbose"]
    reference = time_command([*c_tool, *map(str, files)], repeats)
    show("mariadb-binlog --verbose", reference)
    show("mariadb-binlog --verbose, start-up", time_command([*c_tool, str(tiny)], repeats))
    for pure in (False, True):
        env = {k: v for k, v in os.environ.items() if k != PURE_ENV}
        if pure:
            env[PURE_ENV] = "1"
        mode = binlake_mode(env)
        dump = [*binlake_command(), "binlog", "dump"]
        start = time_command([*dump, str(tiny)], repeats, env)
        show("binlake binlog dump, start-up", start, f", {mode}")
        for options in (["--rows"], ["--rows", "--json"]):
            run = time_command([*dump, *options, *map(str, files)], repeats, env)
            show(f"binlake binlog dump {' '.join(options)}", run, f", {mode}")
            print(
                f"  {reference.wall / run.wall:.2f}x of mariadb-binlog --verbose "
                f"({run.wall - start.wall:.2f} s past start-up)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument(
        "--dump", action="store_true", help="time whole `binlake binlog dump` commands instead"
    )
    parser.add_argument("--repeats", type=int, default=3, help="--dump: best of this many runs")
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
            if args.dump:
                print(f"binlog: {size / 1e6:.1f} MB, {args.rows} rows written")
                time_dump_commands(files, header_only(files[0], base / "tiny.bin"), args.repeats)
                return
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
