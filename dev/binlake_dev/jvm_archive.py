"""A class-data-sharing archive for the tests' Spark drivers (JDK 17 dynamic AppCDS).

Most of a short Spark run's start is the JVM loading and verifying some 20,000 classes of
Spark, Iceberg and Parquet. ``python -m binlake_dev.jvm_archive`` (run by ``make test``) runs
one small Iceberg workload in a driver started with ``-XX:ArchiveClassesAtExit`` and keeps
the archive under ``<cache root>/jvm/``; the tests' drivers then map those classes from it
(``-XX:SharedArchiveFile``): a cold session and its first commit measured 13 s without it and
7 s with it, on 2 cores.

The archive is named after what it was built from (the JVM, pyspark's jars, the Iceberg and
SQLite jars): a changed install gets a new archive, never a stale one. The JVM checks it again
on every start and quietly runs without it when it does not match (``-Xlog:cds=off``: its
warnings would go to the driver's stdout, which ``--json`` output shares). Speed only: no test
depends on whether the archive is used.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

#: JVM options of the tests' short-lived Spark JVMs (tests/lake_targets.py says why).
SHORT_RUN_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
#: Options that map a built archive; logging off so that nothing reaches the driver's stdout.
_USE = "-XX:SharedArchiveFile={path} -Xlog:cds=off -Xlog:cds+dynamic=off"

#: What the archive's driver runs: the statements a short replicate run's first batches make
#: (an embedded-catalog table created, written, row-level changed, read).
_WORKLOAD = """
import sys
from pathlib import Path
from binlake.lake.spark.session import SparkSettings, build_session, stop_session
spark = build_session(SparkSettings(app_name="jvm-archive", warehouse=Path(sys.argv[1])))
for statement in (
    "CREATE NAMESPACE IF NOT EXISTS lake.a",
    "CREATE TABLE lake.a.t (id BIGINT, v STRING, d DECIMAL(10,2), ts TIMESTAMP) USING iceberg "
    "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read', "
    "'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read')",
    "INSERT INTO lake.a.t VALUES (1, 'a', 1.50, current_timestamp()), (2, 'b', 2.50, NULL)",
    "MERGE INTO lake.a.t t USING (SELECT 2 AS id, 'c' AS v) s ON t.id = s.id "
    "WHEN MATCHED THEN UPDATE SET t.v = s.v "
    "WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, s.v)",
    "DELETE FROM lake.a.t WHERE id = 1",
    "SELECT count(*), max(v) FROM lake.a.t",
    "SELECT * FROM lake.a.t.snapshots",
):
    spark.sql(statement).collect()
stop_session(spark)
"""


def archive_path() -> Path | None:
    """Where the archive for this machine's JVM and jars lives (built or not); None when
    Java or Spark's jars cannot be found."""
    from binlake.lake.spark.runtime import cache_root, find_java, jar_cache_dir, sqlite_jdbc_jar

    try:
        import pyspark

        java = find_java().resolve()
        spark_jars = Path(pyspark.__file__).parent / "jars"
        inputs = [java, *sorted(spark_jars.glob("*.jar")), *sorted(jar_cache_dir().glob("*.jar"))]
        inputs.append(sqlite_jdbc_jar())
    except Exception:  # no archive is a slower run, never a failure
        return None
    digest = hashlib.sha256()
    for path in inputs:
        stat = path.stat()
        digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return cache_root() / "jvm" / f"spark-driver-{digest.hexdigest()[:16]}.jsa"


def driver_options(base: str) -> str:
    """``base`` JVM options plus the archive's, when it is built."""
    path = archive_path()
    if path is None or not path.is_file():
        return base
    return f"{base} {_USE.format(path=path)}"


def build(base: str) -> Path | None:
    """Build the archive when missing (about 25 s); return its path, or None when it could
    not be built (the reason goes to stderr; tests then run without it)."""
    path = archive_path()
    if path is None or path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.partial")
    env = {**os.environ, "SPARK_SUBMIT_OPTS": f"{base} -XX:ArchiveClassesAtExit={partial}"}
    with tempfile.TemporaryDirectory(prefix="jvm-archive-") as warehouse:
        run = subprocess.run(
            [sys.executable, "-c", _WORKLOAD, warehouse],
            env=env, capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
    if run.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        why = f"exit {run.returncode}: {run.stderr[-2000:]}"
        print(f"jvm_archive: not built ({why})", file=sys.stderr)
        return None
    os.replace(partial, path)  # a cache: a lost archive is rebuilt, so no fsync
    return path


def main() -> int:
    path = build(SHORT_RUN_OPTIONS)
    print(f"jvm archive: {path if path else 'none (tests run without it)'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
