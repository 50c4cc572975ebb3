"""Snapshot speed: `binlake snapshot` against a plain Spark JDBC read + Iceberg write.

On a sandbox MariaDB, one table ``db.t`` (INT key, VARCHAR(40), DECIMAL(12,2), DATETIME(6),
BIGINT UNSIGNED) of ``--rows`` rows (the SEQUENCE engine), copied into Iceberg tables in one
warehouse, in the same run:

- binlake: ``binlake snapshot --config F --tables db.t`` as a subprocess (its own Spark session,
  ``[snapshot] chunk_rows`` rows per chunk, each chunk read through PyMySQL in its own
  consistent snapshot and appended with its progress in the same Iceberg commit). Timed from
  the command's own line ``db.t: done, N rows in S s`` (the copy, without Spark's start); the
  subprocess's wall time is reported too.
- the reference: one Spark session built like binlake's (``build_session``, ``local[2]``, the
  embedded Hadoop catalog) plus the Debian MariaDB JDBC driver on ``spark.jars``;
  ``spark.read.jdbc`` of the same table in ``--partitions`` partitions on ``id`` and
  ``writeTo(lake.db.t_ref).createOrReplace()``. Timed from the read to the end of the write
  (the session's start excluded). No consistent position, no resume, no exact conversions.

Prints seconds and rows/s for each and the ratio binlake / reference, after checking that both
Iceberg tables hold ``--rows`` rows. Not a test.

    .venv/bin/python bench/snapshot.py [--rows 300000] [--chunk-rows 50000] [--partitions 2]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from binlake.lake.session import SparkSettings, build_session, stop_session
from binlake_dev.sandbox import MariaDBSandbox

JDBC_JAR = Path("/usr/share/java/mariadb-java-client.jar")
DDL = (
    "CREATE TABLE db.t (id INT PRIMARY KEY, v VARCHAR(40), n DECIMAL(12,2), at DATETIME(6), "
    "u BIGINT UNSIGNED)"
)
FILL = (
    "INSERT INTO db.t SELECT seq, CONCAT('value ', seq), seq / 100, "
    "TIMESTAMPADD(MICROSECOND, seq * 1001, '2024-01-01 00:00:00'), "
    "18446744073709551615 - seq FROM db.seq_1_to_{rows}"
)
BINLAKE_TABLE = "lake.db.t"
REFERENCE_TABLE = "lake.db.t_ref"
DONE_LINE = re.compile(r"^db\.t: (\w+), ([\d,]+) rows in ([\d,.]+) s$", re.MULTILINE)


@dataclass(frozen=True)
class Timing:
    rows: int
    seconds: float
    wall_seconds: float

    @property
    def rate(self) -> float:
        return self.rows / self.seconds


def write_config(folder: Path, sandbox: MariaDBSandbox, warehouse: Path, chunk_rows: int) -> Path:
    path = folder / "binlake.toml"
    path.write_text(
        f'[source]\nhost = "127.0.0.1"\nport = {sandbox.port}\nuser = "root"\n'
        f'server_id = 4244\n[state]\ndir = "{folder / "state"}"\n'
        f'[target]\nwarehouse = "{warehouse}"\n[tables]\ninclude = ["db.t"]\n'
        f"[snapshot]\ninitial = true\nchunk_rows = {chunk_rows}\n"
    )
    return path


def binlake_snapshot(config: Path) -> Timing:
    command = [sys.executable, "-m", "binlake.cli.main", "snapshot"]
    command += ["--config", str(config), "--tables", "db.t"]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    match = DONE_LINE.search(done.stdout)
    if done.returncode != 0 or match is None or match.group(1) != "done":
        raise SystemExit(
            f"binlake snapshot failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
        )
    rows = int(match.group(2).replace(",", ""))
    return Timing(rows, float(match.group(3).replace(",", "")), wall)


def reference_copy(spark: SparkSession, port: int, rows: int, partitions: int) -> Timing:
    url = f"jdbc:mysql://127.0.0.1:{port}/db?permitMysqlScheme"
    properties = {"user": "root", "password": "", "driver": "org.mariadb.jdbc.Driver"}
    started = time.monotonic()
    frame = spark.read.jdbc(
        url,
        "t",
        column="id",
        lowerBound=1,
        upperBound=rows,
        numPartitions=partitions,
        properties=properties,
    )
    frame.writeTo(REFERENCE_TABLE).using("iceberg").createOrReplace()
    seconds = time.monotonic() - started
    return Timing(rows, seconds, seconds)


def count(spark: SparkSession, table: str) -> int:
    return int(spark.table(table).count())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--chunk-rows", type=int, default=50_000, help="binlake's chunk_rows")
    parser.add_argument("--partitions", type=int, default=2, help="JDBC read partitions on id")
    args = parser.parse_args()
    if not JDBC_JAR.exists():
        raise SystemExit(f"{JDBC_JAR} is missing: apt-get install -y libmariadb-java")
    with tempfile.TemporaryDirectory(prefix="binlake-bench-") as tmp:
        run(Path(tmp), args)


def run(folder: Path, args: argparse.Namespace) -> None:
    warehouse = folder / "warehouse"
    sandbox = MariaDBSandbox(folder / "mariadb").start()
    try:
        sandbox.execute("CREATE DATABASE db")
        sandbox.execute(DDL)
        sandbox.execute(FILL.format(rows=args.rows))
        print(f"source: db.t with {args.rows:,} rows")
        ours = binlake_snapshot(write_config(folder, sandbox, warehouse, args.chunk_rows))
        spark = build_session(
            SparkSettings(
                app_name="binlake-snapshot-reference", warehouse=warehouse, jars=(str(JDBC_JAR),)
            )
        )
        try:
            theirs = reference_copy(spark, sandbox.port, args.rows, args.partitions)
            counts = {t: count(spark, t) for t in (BINLAKE_TABLE, REFERENCE_TABLE)}
        finally:
            stop_session(spark)
    finally:
        sandbox.stop()
    for table, rows in counts.items():
        if rows != args.rows:
            raise SystemExit(f"{table} holds {rows:,} rows, not {args.rows:,}")
    report(args, ours, theirs)


def report(args: argparse.Namespace, ours: Timing, theirs: Timing) -> None:
    print(f"both Iceberg tables hold {args.rows:,} rows")
    print(f"{'copy':<52} {'rows':>9} {'seconds':>8} {'rows/s':>9}")
    print(
        f"{'binlake snapshot (chunk_rows ' + format(args.chunk_rows, ',') + ')':<52} "
        f"{ours.rows:>9,} {ours.seconds:>8.1f} {ours.rate:>9,.0f}"
    )
    print(f"{'  (subprocess wall time, with Spark start)':<52} {'':>9} {ours.wall_seconds:>8.1f}")
    print(
        f"{'Spark JDBC read (' + str(args.partitions) + ' partitions on id) + Iceberg write':<52} "
        f"{theirs.rows:>9,} {theirs.seconds:>8.1f} {theirs.rate:>9,.0f}"
    )
    print(f"ratio binlake / reference (rows/s): {ours.rate / theirs.rate:.2f}x")


if __name__ == "__main__":
    main()
