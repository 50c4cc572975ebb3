"""Lake health: a table after many binlake commits of mixed updates and deletes, before and after
`binlake maintain`, against the same rows written once by a plain ``createOrReplace``.

Per size in ``--rows`` (comma-separated, e.g. ``100000,10000000``), on a sandbox MariaDB and one
warmed Spark session (``local[2]``, the embedded catalog):

1. ``bench.h<rows>`` preloaded on the source and in the lake without the binlog (``_scale.py``);
2. ``--commits`` source transactions, each updating ``--updates`` random rows, deleting one and
   inserting one, replicated with ``[applier] max_transactions = 1``: one binlake commit
   each (row deltas: data files and equality delete files pile up);
3. measured ("before"): data and delete files, manifests, snapshots, and the warm time (median
   of 3) of ``count(*)``, a point lookup by key and a ``GROUP BY``;
4. `binlake maintain` on the table (``Maintainer``, the default ``[maintenance]`` thresholds but
   ``snapshot_max_age_s = 0``), its steps and seconds, then measured again ("after");
5. the same rows written once (``createOrReplace`` of the table's current rows) and measured
   ("fresh"); the after / fresh ratio per query (the issue's goal: 1.2x or less).

Then the scaling between the largest and the smallest size. Not a test. A quick check of the
script: ``--rows 2000 --commits 20``.

    .venv/bin/python bench/maintain.py [--rows 100000,10000000] [--commits 2000]
"""

from __future__ import annotations

import argparse
import io
import random
import tempfile
import time
from pathlib import Path

from pyspark.sql import SparkSession

from _scale import fill_lake, fill_source, load_average
from binlake.config import load_config
from binlake.console import Console
from binlake.lake.session import SparkSettings, build_session, stop_session
from binlake.lake.table_maintenance import table_health
from binlake.maintain.runner import Maintainer
from binlake_dev.sandbox import MariaDBSandbox
from replicate import Source, replicate, warm_up, write_config

#: Thresholds of the maintained run: the defaults, but every snapshot older than now expires
#: (the newest 100 and the applied position's stay).
MAINTENANCE = "[maintenance]\nsnapshot_max_age_s = 0\n"
#: One source transaction a batch: a binlake commit each (the relay log's opening events make
#: a first batch of their own that commits nothing).
APPLIER = "max_transactions = 1\nmax_seconds = 0.1\n"


def say(line: str) -> None:
    print(f"{line}  [load {load_average()}]", flush=True)


def queries(table: str, rows: int) -> dict[str, str]:
    return {
        "count(*)": f"SELECT count(*) FROM {table}",
        "point lookup": f"SELECT * FROM {table} WHERE id = {rows // 2}",
        "GROUP BY": f"SELECT a % 10 AS g, count(*), sum(d) FROM {table} GROUP BY 1",
    }


def measure(spark: SparkSession, table: str, rows: int, label: str) -> dict[str, float]:
    """Files and warm read times (median of 3) of ``table``; the times by query."""
    spark.sql(f"REFRESH TABLE {table}")
    health = table_health(spark, table, 32 * 1024 * 1024)
    say(
        f"{label} {table}: {health.data_files} data files ({health.small_files} small), "
        f"{health.delete_files} delete files (and {health.dangling_deletes} dangling), "
        f"{health.manifests} manifests, "
        f"{health.snapshots} snapshots"
    )
    out = {}
    for name, query in queries(table, rows).items():
        spark.sql(query).collect()
        times = []
        for _ in range(3):
            started = time.monotonic()
            spark.sql(query).collect()
            times.append(time.monotonic() - started)
        out[name] = sorted(times)[1]
        say(f"{label} {table} {name}: {out[name]:.3f} s")
    return out


def mixed_commits(
    sandbox: MariaDBSandbox, name: str, rows: int, commits: int, updates: int
) -> None:
    """``commits`` transactions: ``updates`` random-key updates, one delete, one insert each."""
    rng = random.Random(rows)
    next_id = rows + 1
    with sandbox.connect("bench", autocommit=False) as conn, conn.cursor() as cursor:
        for n in range(commits):
            keys = ", ".join(str(k) for k in rng.sample(range(1, rows + 1), updates))
            cursor.execute(f"UPDATE bench.{name} SET a = a + 1, s = 'u-{n}' WHERE id IN ({keys})")
            cursor.execute(f"DELETE FROM bench.{name} WHERE id = {rng.randint(1, rows)}")
            cursor.execute(f"INSERT INTO bench.{name} VALUES ({next_id}, 1, 1.00, 'new', NOW(6))")
            next_id += 1
            conn.commit()


def one_size(
    folder: Path, source: Source, spark: SparkSession, rows: int, args: argparse.Namespace
) -> dict[str, dict[str, float]]:
    name = f"h{rows}"
    table = f"lake.bench.{name}"
    state = folder / name
    state.mkdir()
    started = time.monotonic()
    fill_source(source.sandbox, name, rows)
    config = write_config(state, source, folder / "warehouse", tables=(name,), applier=APPLIER)
    config.write_text(config.read_text() + MAINTENANCE)
    replicate(config, spark)
    fill_lake(spark, name, rows)
    say(f"{table}: {rows:,} rows preloaded in {time.monotonic() - started:.1f} s")
    mixed_commits(source.sandbox, name, rows, args.commits, args.updates)
    seconds, applied = replicate(config, spark)
    say(
        f"{table}: {applied.batches} binlake commits ({applied.row_changes:,} row changes) "
        f"in {seconds:.1f} s"
    )
    times = {"before": measure(spark, table, rows, "before")}
    maintainer = Maintainer(load_config(config), spark, Console(io.StringIO(), live=False))
    report = maintainer.maintain(maintainer.tables()[0])
    for run in report.runs:
        counts = ", ".join(f"{k} {v:,}" for k, v in run.counts.items() if v)
        say(
            f"maintain {table} {run.planned.step.value}: {counts or 'nothing'} "
            f"in {run.seconds:.1f} s ({run.planned.reason})"
        )
    times["after"] = measure(spark, table, rows, "after")
    fresh = f"lake.bench_fresh.{name}"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench_fresh")
    spark.table(table).writeTo(fresh).using("iceberg").createOrReplace()
    times["fresh"] = measure(spark, fresh, rows, "fresh")
    for query in times["fresh"]:
        ratio = times["after"][query] / max(times["fresh"][query], 1e-9)
        before = times["before"][query] / max(times["fresh"][query], 1e-9)
        say(
            f"{table} {query}: before / fresh {before:.2f}x, after / fresh {ratio:.2f}x "
            "(goal: 1.2x or less)"
        )
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="100000", help="table sizes, comma-separated")
    parser.add_argument("--commits", type=int, default=2000, help="binlake commits per table")
    parser.add_argument("--updates", type=int, default=5, help="rows updated per commit")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.rows.split(",") if s.strip())
    with tempfile.TemporaryDirectory(prefix="binlake-bench-maintain-") as tmp:
        folder = Path(tmp)
        sandbox = MariaDBSandbox(folder / "mariadb").start()
        spark = build_session(SparkSettings(warehouse=folder / "warehouse"))
        try:
            warm_up(spark)
            sandbox.execute("CREATE DATABASE bench")
            results = {rows: one_size(folder, Source(sandbox), spark, rows, args) for rows in sizes}
        finally:
            stop_session(spark)
            sandbox.kill()
    if len(sizes) > 1:
        small, big = results[sizes[0]], results[sizes[-1]]
        for stage in ("before", "after", "fresh"):
            for query in big[stage]:
                ratio = big[stage][query] / max(small[stage][query], 1e-9)
                say(f"scaling {sizes[-1]:,} / {sizes[0]:,} rows, {stage} {query}: {ratio:.2f}x")


if __name__ == "__main__":
    main()
