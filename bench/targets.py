"""Commands on each lake target: `binlake replicate`, `status`, `verify` and `check-target` timed
on the embedded catalog (``local[2]``), on Iceberg's JDBC catalog (``local[2]``) and on the JDBC
catalog from a Spark standalone cluster (a master and a 2-core worker from pyspark's own
distribution, ``binlake_dev.cluster``), in the same run.

Workload: one table ``bench.t (id INT PRIMARY KEY, v VARCHAR(40), n BIGINT)`` of ``--rows`` rows
(the SEQUENCE engine) plus ``--updates`` single-row update transactions, on a sandbox MariaDB.
Per target: `replicate --until-caught-up` once (wall time, Spark's start included), then
``--repeat`` runs each of `status` (the embedded catalog's files, the JDBC catalog's database:
no Spark), `verify` (a Spark session on the target's master reads the table) and
`check-target`. Wall times of the subprocesses; the median is printed. Not a test.

    .venv/bin/python bench/targets.py [--rows 100000] [--updates 200] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from binlake_dev.cluster import SparkCluster
from binlake_dev.postgres import JDBC_JAR, PostgresServer
from binlake_dev.sandbox import MariaDBSandbox

CLUSTER_CONF = (
    '"spark.driver.host" = "127.0.0.1"\n"spark.cores.max" = "1"\n'
    '"spark.executor.cores" = "1"\n"spark.executor.memory" = "1g"\n'
)


def config(folder: Path, source: MariaDBSandbox, target: str, sections: str) -> Path:
    """The target's config file; its catalog is named after it (the two JDBC targets share
    one catalog database, whose rows are keyed by the catalog's name)."""
    path = folder / target / "binlake.toml"
    path.parent.mkdir(parents=True)
    catalog = target.replace("-", "_")
    path.write_text(
        f'[source]\nhost = "127.0.0.1"\nport = {source.port}\nuser = "root"\n'
        f'server_id = 4243\n[state]\ndir = "{path.parent / "state"}"\n'
        f'[target]\nwarehouse = "{path.parent / "warehouse"}"\ncatalog = "{catalog}"\n'
        '[tables]\ninclude = ["bench.*"]\n[snapshot]\ninitial = false\n' + sections
    )
    return path


def timed(*argv: str) -> float:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "binlake.cli.main", *argv], capture_output=True, text=True
    )
    took = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return took


def load(source: MariaDBSandbox, rows: int, updates: int) -> None:
    source.execute("CREATE DATABASE bench")
    source.execute("CREATE TABLE bench.t (id INT PRIMARY KEY, v VARCHAR(40), n BIGINT)")
    source.execute(f"INSERT INTO bench.t SELECT seq, MD5(seq), seq FROM bench.seq_1_to_{rows}")
    with source.connect("bench") as conn, conn.cursor() as cursor:
        for i in range(updates):
            cursor.execute("UPDATE t SET n = n + 1 WHERE id = %s", (i * 7 % rows + 1,))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--updates", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-targets-") as tmp:
        folder = Path(tmp)
        postgres, cluster = PostgresServer(), SparkCluster()
        started = time.monotonic()
        pg_thread = threading.Thread(target=postgres.start)
        pg_thread.start()
        cluster.start()
        pg_thread.join()
        print(
            f"fixtures: cluster {cluster.timings}, PostgreSQL {postgres.timings}, "
            f"both ready in {time.monotonic() - started:.1f} s"
        )
        source = MariaDBSandbox(folder / "mariadb").start()
        try:
            load(source, args.rows, args.updates)
            (folder / "pw").write_text(postgres.password)
            jdbc = (
                f'[catalog]\ntype = "jdbc"\nuri = "{postgres.jdbc_url}"\nuser = "{postgres.user}"\n'
                f'password_file = "{folder / "pw"}"\n'
            )
            targets = {
                "embedded": "",
                "jdbc": jdbc + f'warehouse = "{folder / "jdbc-wh"}"\n'
                f'[spark]\njars = ["{JDBC_JAR}"]\n',
                "cluster-jdbc": jdbc + f'warehouse = "{folder / "cluster-wh"}"\n'
                f'[spark]\nmaster = "{cluster.url}"\nmaster_ui = "{cluster.ui}"\n'
                f'jars = ["{JDBC_JAR}"]\n[spark.conf]\n{CLUSTER_CONF}',
            }
            print(f"{'target':14} {'replicate':>10} {'status':>8} {'verify':>8} {'check':>8}")
            for name, sections in targets.items():
                path = config(folder, source, name, sections)
                replicate = timed("replicate", "--config", str(path), "--until-caught-up")
                times = {
                    cmd: statistics.median(
                        timed(cmd, "--config", str(path)) for _ in range(args.repeat)
                    )
                    for cmd in ("status", "verify", "check-target")
                }
                print(
                    f"{name:14} {replicate:9.1f}s {times['status']:7.1f}s "
                    f"{times['verify']:7.1f}s {times['check-target']:7.1f}s",
                    flush=True,
                )
        finally:
            source.kill()
            cluster.stop()
            postgres.remove()


if __name__ == "__main__":
    main()
