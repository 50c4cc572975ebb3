"""Snapshot speed: `binlake snapshot` against a Spark JDBC read + Iceberg write and against the
`mariadb --quick` client read, for each table size, in the same run.

On a sandbox MariaDB, one table per size ``db.t<rows>`` (INT key, VARCHAR(40), DECIMAL(12,2),
DATETIME(6), BIGINT UNSIGNED; the SEQUENCE engine fills it), and a small warm-up table
``db.t0_warmup``, and two 1,000-row tables ``db.t0_xfixed``, ``db.t0_yfixed`` (the per-copy fixed
overhead). For each size, one after the other:

- binlake: ``binlake snapshot --tables db.t0_warmup,db.t0_xfixed,db.t0_yfixed,db.t<rows>`` as
  a subprocess (its own Spark session, ``local[N]``; chunks of ``[snapshot] chunk_rows`` rows
  read by Spark tasks, written as Parquet files by the tasks, committed by the driver).
  ``db.t0_warmup`` is copied first in the same process, so the session's first ``mapInArrow``
  (Python workers importing pyarrow, the JVM's Arrow path) is not charged to the measured
  table, as in a long-lived replicator. Timed from the command's own line ``db.t<rows>: done, N
  rows in S s``; ``db.t0_yfixed``'s line, copied after ``db.t0_xfixed``, is the fixed cost of
  one copy (what a copy costs whatever its size: plan, positions, one Spark job, commits). The
  subprocess's wall time (with Spark's start) and the peak resident memory (VmHWM, sampled
  every 0.25 s from /proc) of the Python driver and of its JVM (which also runs the executors in
  local mode) are reported too.
- the reference: one Spark session built like binlake's plus the Debian MariaDB JDBC driver;
  ``spark.read.jdbc`` of ``db.t0_warmup`` (warm-up, untimed), then of the table in ``--partitions``
  partitions on ``id`` (as many as binlake's chunks run at once: its Spark cores) and
  ``writeTo(...).createOrReplace()``, timed from the read to the end of the write.
- the read limit: ``mariadb --quick --batch -e 'SELECT * FROM db.t<rows>' > /dev/null`` (the C
  client, no conversion, no write).

Checks that both Iceberg tables hold the table's rows, then prints per size: seconds and rows/s
of each, the ratios binlake / JDBC and binlake / client read, binlake's wall time and peak RSS;
the fixed overhead; then the largest size against the smallest (how each scales). Not a test;
the default sizes are the issue's (1 M and 10 M rows): small sizes (``--sizes 20000``) only
check that it runs.

    .venv/bin/python bench/snapshot.py [--sizes 1000000,10000000] [--chunk-rows 250000]
        [--partitions 2] [--master local[2]]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from binlake.lake.spark.session import SparkSettings, build_session, stop_session
from binlake_dev.sandbox import MariaDBSandbox

JDBC_JAR = Path("/usr/share/java/mariadb-java-client.jar")
COLUMNS = "(id INT PRIMARY KEY, v VARCHAR(40), n DECIMAL(12,2), at DATETIME(6), u BIGINT UNSIGNED)"
FILL = (
    "INSERT INTO db.{table} SELECT seq, CONCAT('value ', seq), seq / 100, "
    "TIMESTAMPADD(MICROSECOND, seq * 1001, '2024-01-01 00:00:00'), "
    "18446744073709551615 - seq FROM db.seq_1_to_{rows}"
)
WARM_ROWS = 10_000
#: The warm-up table: copies run in table-name order, and this name sorts first.
WARM = "t0_warmup"
#: The fixed-overhead tables, copied right after the warm-up one (names sort in that order);
#: the second one's copy is reported (the first still meets a few first times in the session:
#: measured 3-5 s more on a loaded machine).
FIXED_FIRST = "t0_xfixed"
FIXED = "t0_yfixed"
FIXED_ROWS = 1_000
DONE_LINE = r"^db\.{table}: (\w+), ([\d,]+) rows in ([\d,.]+) s$"


@dataclass(frozen=True)
class Timing:
    rows: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.rows / max(self.seconds, 1e-9)


@dataclass(frozen=True)
class OurRun:
    copy: Timing
    #: The copy of the 1,000-row table: binlake's fixed cost per copy.
    fixed: Timing
    wall_seconds: float
    driver_kb: int
    jvm_kb: int


@dataclass(frozen=True)
class SizeResult:
    rows: int
    ours: OurRun
    jdbc: Timing
    client: Timing


def table_name(rows: int) -> str:
    return f"t{rows}"


def write_config(folder: Path, sandbox: MariaDBSandbox, args: argparse.Namespace) -> Path:
    path = folder / "binlake.toml"
    path.write_text(
        f'[source]\nhost = "127.0.0.1"\nport = {sandbox.port}\nuser = "root"\n'
        f'server_id = 4244\n[state]\ndir = "{folder / "state"}"\n'
        f'[target]\nwarehouse = "{folder / "warehouse"}"\n[spark]\nmaster = "{args.master}"\n'
        f'[tables]\ninclude = ["db.*"]\n'
        f"[snapshot]\ninitial = true\nchunk_rows = {args.chunk_rows}\n"
    )
    return path


class PeakMemory(threading.Thread):
    """VmHWM of a process and of its java descendant, polled until the process ends."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.driver_kb = 0
        self.jvm_kb = 0

    def run(self) -> None:
        while Path(f"/proc/{self.pid}").exists():
            self.driver_kb = max(self.driver_kb, _hwm_kb(self.pid))
            for child in _descendants(self.pid):
                if "java" in _read(f"/proc/{child}/comm"):
                    self.jvm_kb = max(self.jvm_kb, _hwm_kb(child))
            time.sleep(0.25)


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _hwm_kb(pid: int) -> int:
    found = re.search(r"^VmHWM:\s+(\d+) kB", _read(f"/proc/{pid}/status"), re.MULTILINE)
    return int(found.group(1)) if found else 0


def _descendants(pid: int) -> list[int]:
    children = _read(f"/proc/{pid}/task/{pid}/children").split()
    out = [int(c) for c in children]
    for child in list(out):
        out += _descendants(child)
    return out


def binlake_snapshot(config: Path, rows: int) -> OurRun:
    table = table_name(rows)
    command = [sys.executable, "-m", "binlake.cli.main", "snapshot", "--config", str(config)]
    command += ["--tables", f"db.{WARM},db.{FIXED_FIRST},db.{FIXED},db.{table}"]
    started = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    memory = PeakMemory(process.pid)
    memory.start()
    stdout, stderr = process.communicate()
    wall = time.monotonic() - started
    memory.join()
    if process.returncode != 0:
        raise SystemExit(f"binlake snapshot failed ({process.returncode}):\n{stdout}\n{stderr}")
    copy, fixed = (done_line(stdout, name, stderr) for name in (table, FIXED))
    return OurRun(copy, fixed, wall, memory.driver_kb, memory.jvm_kb)


def done_line(stdout: str, table: str, stderr: str) -> Timing:
    """The copy of ``table`` as ``binlake snapshot`` reported it."""
    match = re.search(DONE_LINE.format(table=table), stdout, re.MULTILINE)
    if match is None or match.group(1) != "done":
        raise SystemExit(f"binlake snapshot did not copy db.{table}:\n{stdout}\n{stderr}")
    return Timing(int(match.group(2).replace(",", "")), float(match.group(3).replace(",", "")))


def jdbc_copy(spark: SparkSession, port: int, rows: int, partitions: int) -> Timing:
    url = f"jdbc:mysql://127.0.0.1:{port}/db?permitMysqlScheme"
    properties = {"user": "root", "password": "", "driver": "org.mariadb.jdbc.Driver"}

    def copy(table: str, count: int) -> float:
        started = time.monotonic()
        frame = spark.read.jdbc(
            url,
            table,
            column="id",
            lowerBound=1,
            upperBound=count,
            numPartitions=partitions,
            properties=properties,
        )
        frame.writeTo(f"lake.db.{table}_jdbc").using("iceberg").createOrReplace()
        return time.monotonic() - started

    copy(WARM, WARM_ROWS)
    return Timing(rows, copy(table_name(rows), rows))


def client_read(sandbox: MariaDBSandbox, rows: int) -> Timing:
    client = shutil.which("mariadb") or shutil.which("mysql")
    if client is None:
        raise SystemExit("no mariadb client on PATH")
    command = [client, "--no-defaults", "-uroot", "-h127.0.0.1", f"-P{sandbox.port}"]
    command += ["--quick", "--batch", "-e", f"SELECT * FROM db.{table_name(rows)}"]
    started = time.monotonic()
    subprocess.run(command, stdout=subprocess.DEVNULL, check=True)
    return Timing(rows, time.monotonic() - started)


def count(spark: SparkSession, table: str) -> int:
    spark.sql(f"REFRESH TABLE {table}")
    return int(spark.table(table).count())


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="1000000,10000000", help="table sizes, in rows")
    parser.add_argument("--chunk-rows", type=int, default=250_000, help="binlake's chunk_rows")
    parser.add_argument("--partitions", type=int, default=2, help="JDBC read partitions on id")
    parser.add_argument("--master", default="local[2]", help="binlake's [spark] master")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if not JDBC_JAR.exists():
        raise SystemExit(f"{JDBC_JAR} is missing: apt-get install -y libmariadb-java")
    with tempfile.TemporaryDirectory(prefix="binlake-bench-") as tmp:
        results = run(Path(tmp), sizes, args)
    report(results, args)


def run(folder: Path, sizes: list[int], args: argparse.Namespace) -> list[SizeResult]:
    sandbox = MariaDBSandbox(folder / "mariadb").start()
    try:
        sandbox.execute("CREATE DATABASE db")
        fixed = [(WARM, WARM_ROWS), (FIXED_FIRST, FIXED_ROWS), (FIXED, FIXED_ROWS)]
        for table, rows in fixed + [(table_name(r), r) for r in sizes]:
            sandbox.execute(f"CREATE TABLE db.{table} {COLUMNS}")
            sandbox.execute(FILL.format(table=table, rows=rows))
        print(f"source: db.{WARM} ({WARM_ROWS:,} rows), " + ", ".join(f"{r:,}" for r in sizes))
        config = write_config(folder, sandbox, args)
        ours = {rows: binlake_snapshot(config, rows) for rows in sizes}
        settings = SparkSettings(
            app_name="binlake-snapshot-reference",
            warehouse=folder / "warehouse",
            jars=(str(JDBC_JAR),),
            # Spark's JDBC read into Iceberg's writer holds a partition's dictionary pages on
            # the heap: 1 GB (binlake's default, enough for binlake's copy) ran out at 1 M rows.
            conf={"spark.driver.memory": "4g"},
        )
        spark = build_session(settings)
        try:
            results = []
            for rows in sizes:
                jdbc = jdbc_copy(spark, sandbox.port, rows, args.partitions)
                for table in (f"lake.db.{table_name(rows)}", f"lake.db.{table_name(rows)}_jdbc"):
                    if (held := count(spark, table)) != rows:
                        raise SystemExit(f"{table} holds {held:,} rows, not {rows:,}")
                results.append(SizeResult(rows, ours[rows], jdbc, client_read(sandbox, rows)))
        finally:
            stop_session(spark)
    finally:
        sandbox.stop()
    return results


def report(results: list[SizeResult], args: argparse.Namespace) -> None:
    print(
        f"chunk_rows {args.chunk_rows:,}; JDBC partitions {args.partitions}; {args.master}; "
        f"fixed s: the copy of db.{FIXED} ({FIXED_ROWS:,} rows) in the same binlake run"
    )
    print(
        f"{'rows':>11} {'binlake s':>9} {'rows/s':>10} {'JDBC s':>8} {'rows/s':>10} "
        f"{'client s':>8} {'rows/s':>10} {'vs JDBC':>8} {'vs client':>9} {'wall s':>7} "
        f"{'driver MB':>9} {'JVM MB':>7} {'fixed s':>7}"
    )
    for r in results:
        ours = r.ours.copy
        print(
            f"{r.rows:>11,} {ours.seconds:>9.1f} {ours.rate:>10,.0f} {r.jdbc.seconds:>8.1f} "
            f"{r.jdbc.rate:>10,.0f} {r.client.seconds:>8.1f} {r.client.rate:>10,.0f} "
            f"{ours.rate / r.jdbc.rate:>7.2f}x {ours.rate / r.client.rate:>8.2f}x "
            f"{r.ours.wall_seconds:>7.1f} {r.ours.driver_kb / 1024:>9.0f} "
            f"{r.ours.jvm_kb / 1024:>7.0f} {r.ours.fixed.seconds:>7.2f}"
        )
    if len(results) > 1:
        small, large = results[0], results[-1]
        factor = large.rows / small.rows
        print(
            f"{large.rows:,} vs {small.rows:,} rows ({factor:.0f}x the rows): binlake "
            f"{large.ours.copy.seconds / small.ours.copy.seconds:.1f}x the time, JDBC "
            f"{large.jdbc.seconds / small.jdbc.seconds:.1f}x, client "
            f"{large.client.seconds / small.client.seconds:.1f}x; binlake's driver peak RSS "
            f"{large.ours.driver_kb / max(small.ours.driver_kb, 1):.2f}x"
        )


if __name__ == "__main__":
    main()
