"""The key index (``binlake.keyindex``) at size: bytes per key on disk, the rebuild's time, lookups
per second, a batch's index work, and the applier's peak memory, at each size in ``--keys``.

Per size N (default ``1000000,10000000``), in a temporary folder:

* **rebuild**: N keys (a ``long`` key, as binlake's integer keys) in data files of 1 M rows,
  through ``IndexBuilder`` (what a rebuild does with the rows Spark reads), then renamed into
  place and opened with its checks (``quick_check``, the count): the time of each part; the
  reference is pyarrow writing the same (key, file, pos) rows to one Parquet file (a lower bound
  for any on-disk form of them), printed as a ratio;
* **bytes per key**: the index file's size (after the rebuild, and after the batches) / N;
* **lookups**: ``--lookups`` random keys (90% present) in batches of 5,000, per second;
* **batches**: ``--batches`` batches of ``--batch-keys`` keys each (default 5,000; a fraction
  ``--batch-fresh`` of them new keys, default 0.5, the others random keys the index holds), as
  the applier's batch does them (lookups, the found keys' entries moved to their new rows, the
  new keys' entries added, one commit), per second; ``--batch-keys 50000 --batch-fresh 0`` is
  the index's share of a batch of ``bench/replicate.py``'s ``scale`` section;
* **dropping**: a catch-up's removal of the last batch's data file's entries (``drop_files``,
  rolled back; a compaction folded the file): one scan of the entries (format 3 keeps no index
  on ``(file, pos)``);
* **removing by position**: a catch-up over a batch's commit whose index changes were lost:
  the entries of ``--batch-keys`` random rows it deleted by position go (``remove_at``, rolled
  back): one scan of the entries of their data files;
* **peak RSS**: a child process that opens the index and runs the lookups and batches, its
  peak resident memory (``VmHWM``) against the same child at N / 10: the index must not grow
  the applier with the table (ratio near 1).

``--follow N`` (comma-separated sizes) measures instead the two ways to follow a compaction
that moved every row of an N-key index (the keys already read; SQLite only): a catch-up (the
removed files' entries dropped, every moved row's entry put, one commit) against a rebuild
(``rebuild`` above), printed as a ratio: ``key_positions.REBUILD_MOVED_ROWS`` rests on it.

``--spark-rows N`` (comma-separated sizes) measures instead the rebuild as a batch meets it:
an Iceberg table of N rows (``spark.range``: a ``bigint`` key and two columns, made with
binlake's table properties by one ``createOrReplace``, ``local[2]``), its index missing; the
time of ``KeyPositions.begin`` (Spark reads each data file's keys and positions, the index is
built, renamed into place and opened), against Spark reading the same key column
from the files (``SELECT sum(id)``: the read alone) as the reference.

Not a test; run it on a quiet machine. A quick check: ``--keys 100000 --lookups 20000``.

    .venv/bin/python bench/keyindex.py [--keys 1000000,10000000] [--lookups 200000] [--batches 20]
        [--batch-keys 5000] [--batch-fresh 0.5]
    .venv/bin/python bench/keyindex.py --spark-rows 1000000,10000000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from binlake.keyindex.encode import encode_keys
from binlake.keyindex.folder import IndexFolder

UUID = "00000000-0000-4000-8000-00000000beef"
SPEC = "1:int"
FILE_ROWS = 1_000_000
BATCH = 5_000


def keys_of(values: list[int]) -> list[bytes]:
    return encode_keys([pa.array(values, pa.int64())])


def data_path(file: int) -> str:
    return f"s3a://bench/lake/db/t/data/00000-{file}-binlake-{file:08d}-data.parquet"


def rebuild(folder: IndexFolder, count: int) -> dict[str, float]:
    started = time.perf_counter()
    builder = folder.builder(UUID, SPEC)
    for first in range(0, count, FILE_ROWS):
        rows = list(range(first, min(first + FILE_ROWS, count)))
        for at in range(0, len(rows), 100_000):  # Spark hands rows over in batches
            part = rows[at : at + 100_000]
            builder.add(data_path(first // FILE_ROWS), keys_of(part), [r - first for r in part])
    added = time.perf_counter()
    builder.finish(1)
    finished = time.perf_counter()
    index = folder.install(builder)
    index.close()
    installed = time.perf_counter()
    opened = folder.open(UUID, SPEC)
    opened.confirm()  # the checks of a first open (beside the first batch in the applier)
    opened.close()
    checked = time.perf_counter()
    return {
        "add_s": added - started,
        "sort_index_s": finished - added,
        "install_s": installed - finished,
        "open_check_s": checked - installed,
        "total_s": checked - started,
    }


def follow(count: int) -> None:
    """A compaction of the whole table followed by a catch-up, then by a rebuild."""
    with tempfile.TemporaryDirectory() as scratch:
        folder = IndexFolder(Path(scratch))
        built = rebuild(folder, count)["total_s"]
        index = folder.open(UUID, SPEC)
        started = time.perf_counter()
        index.begin()
        index.drop_files([data_path(f // FILE_ROWS) for f in range(0, count, FILE_ROWS)])
        dropped = time.perf_counter()
        moved = list(range(count))
        random.Random(count).shuffle(moved)  # the compaction's order is not the keys'
        for first in range(0, count, FILE_ROWS):
            part = moved[first : first + FILE_ROWS]
            index.put("moved-" + data_path(first), keys_of(part), list(range(len(part))))
        index.commit(2)
        caught_up = time.perf_counter() - started
        index.close()
    print(
        f"{count:,} keys, every row moved: catch-up {caught_up:.1f} s (dropping "
        f"{dropped - started:.1f} s), rebuild {built:.1f} s: catch-up / rebuild "
        f"{caught_up / built:.2f}x",
        flush=True,
    )


def parquet_reference(path: Path, count: int) -> float:
    started = time.perf_counter()
    writer = None
    for first in range(0, count, FILE_ROWS):
        rows = list(range(first, min(first + FILE_ROWS, count)))
        table = pa.table(
            {
                "key": pa.array(keys_of(rows), pa.binary()),
                "file": pa.array([data_path(first // FILE_ROWS)] * len(rows)).dictionary_encode(),
                "pos": pa.array([r - first for r in rows], pa.int64()),
            }
        )
        if writer is None:
            writer = pq.ParquetWriter(path, table.schema, compression="zstd")
        writer.write_table(table)
    if writer is not None:
        writer.close()
    return time.perf_counter() - started


def work(
    folder_path: str, count: int, lookups: int, batches: int, shape: tuple[int, float]
) -> dict[str, float]:
    """In a child: open the index, look keys up, run batches; rates and peak RSS."""
    folder = IndexFolder(Path(folder_path))
    index = folder.open(UUID, SPEC)
    rng = random.Random(7)
    started = time.perf_counter()
    found = 0
    for _ in range(0, lookups, BATCH):
        wanted = [rng.randrange(int(count * 1.1)) for _ in range(BATCH)]
        found += len(index.lookup(keys_of(wanted)))
    looked = time.perf_counter() - started
    started = time.perf_counter()
    next_key = count * 2
    for batch in range(batches):
        keys, fresh_share = shape
        fresh = list(range(next_key, next_key + round(keys * fresh_share)))
        changed = rng.sample(range(count), keys - len(fresh))
        next_key += len(fresh)
        upserted = keys_of(changed + fresh)
        index.begin()  # as the applier's batch does (``key_positions.BatchPositions.chunk``)
        hits = index.lookup(upserted)
        index.paths({f for f, _ in hits.values()})
        data = f"s3a://bench/new-{batch}.parquet"
        moved = [i for i, key in enumerate(upserted) if key in hits]
        added = [i for i, key in enumerate(upserted) if key not in hits]
        index.move(data, [upserted[i] for i in moved], moved)
        index.put(data, [upserted[i] for i in added], added)
        index.commit(2 + batch)
    batched = time.perf_counter() - started
    started = time.perf_counter()
    index.begin()  # a catch-up after a batch's small file was folded: one scan of the entries
    index.drop_files([f"s3a://bench/new-{batches - 1}.parquet"])
    index.rollback()
    dropped = time.perf_counter() - started
    # A catch-up over a batch's commit whose index changes were lost (a kill after its commit):
    # the rows its position deletes name lose their entries (one scan), rolled back.
    hits = index.lookup(keys_of(rng.sample(range(count), shape[0])))
    paths = index.paths({f for f, _ in hits.values()})
    deleted: dict[str, list[int]] = {}
    for file, pos in hits.values():
        deleted.setdefault(paths[file], []).append(pos)
    started = time.perf_counter()
    index.begin()
    index.remove_at(deleted)
    index.rollback()
    removed = time.perf_counter() - started
    index.close()
    return {
        "drop_ms": 1000 * dropped,
        "remove_at_ms": 1000 * removed,
        "lookups_per_s": lookups / looked,
        "hit_ratio": found / max(lookups, 1),
        "batches_per_s": batches / batched if batched else 0.0,
        "batch_ms": 1000 * batched / max(batches, 1),
        "peak_rss_mb": peak_rss_mb(),
    }


def peak_rss_mb() -> float:
    """This process's peak resident memory: ``VmHWM`` (``ru_maxrss`` keeps the parent's peak
    across fork and exec on Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(
    folder: Path, count: int, lookups: int, batches: int, shape: tuple[int, float]
) -> dict[str, float]:
    command = [
        sys.executable, __file__, "--child", str(folder), "--keys", str(count),
        "--lookups", str(lookups), "--batches", str(batches),
        "--batch-keys", str(shape[0]), "--batch-fresh", str(shape[1]),
    ]  # fmt: skip
    out = subprocess.run(command, capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(f"the child failed:\n{out.stderr}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def measure(count: int, lookups: int, batches: int, shape: tuple[int, float]) -> None:
    with tempfile.TemporaryDirectory(prefix="binlake-bench-keyindex-") as temp:
        root = Path(temp)
        folder = IndexFolder(root / "keyindex")
        times = rebuild(folder, count)
        path = folder.current(UUID)
        assert path is not None
        size = path.stat().st_size
        reference = parquet_reference(root / "reference.parquet", count)
        parquet_size = (root / "reference.parquet").stat().st_size
        at_size = child(folder.folder, count, lookups, batches, shape)
        small = IndexFolder(root / "small")
        rebuild(small, max(count // 10, 1))
        at_tenth = child(small.folder, max(count // 10, 1), lookups, batches, shape)
        wal = Path(f"{path}-wal")
        grown = path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
        print(f"keys {count:,}")
        print(
            f"  rebuild {times['total_s']:.1f} s (rows in {times['add_s']:.1f} s, sort and "
            f"index {times['sort_index_s']:.1f} s, rename {times['install_s']:.2f} s, first "
            f"open's checks {times['open_check_s']:.1f} s); Parquet of the same rows "
            f"{reference:.1f} s: ratio {times['total_s'] / reference:.1f}x"
        )
        print(
            f"  on disk {size / count:.1f} bytes/key ({size / 1e6:.1f} MB; Parquet "
            f"{parquet_size / count:.1f} bytes/key); after {batches} batches "
            f"{grown / count:.1f} bytes/key with the WAL"
        )
        print(
            f"  lookups {at_size['lookups_per_s']:,.0f}/s (hits {at_size['hit_ratio']:.0%}); "
            f"at N/10 {at_tenth['lookups_per_s']:,.0f}/s: ratio "
            f"{at_size['lookups_per_s'] / at_tenth['lookups_per_s']:.2f}"
        )
        print(
            f"  batches of {shape[0]:,} keys ({shape[1]:.0%} new): {at_size['batch_ms']:.0f} "
            f"ms each; at N/10 "
            f"{at_tenth['batch_ms']:.0f} ms: ratio {at_size['batch_ms'] / at_tenth['batch_ms']:.2f}"
        )
        print(
            f"  a catch-up dropping the last batch's data file: {at_size['drop_ms']:.0f} ms; at "
            f"N/10 {at_tenth['drop_ms']:.0f} ms"
        )
        print(
            f"  a catch-up removing a batch's {shape[0]:,} deleted rows by position: "
            f"{at_size['remove_at_ms']:.0f} ms; at N/10 {at_tenth['remove_at_ms']:.0f} ms"
        )
        print(
            f"  peak RSS {at_size['peak_rss_mb']:.0f} MB; at N/10 {at_tenth['peak_rss_mb']:.0f} "
            f"MB: ratio {at_size['peak_rss_mb'] / at_tenth['peak_rss_mb']:.2f}"
        )


def spark_rebuilds(sizes: list[int]) -> None:
    """The rebuild of a missing index as a batch meets it, Spark's read included."""
    from binlake.lake.schema.sql import TABLE_PROPERTIES
    from binlake.lake.spark.session import SparkSettings, build_session, stop_session
    from binlake.lake.write.key_positions import KeyPositions
    from binlake.lake.write.row_delta import RowDeltaWriter

    with tempfile.TemporaryDirectory(prefix="binlake-bench-keyindex-spark-") as temp:
        root = Path(temp)
        spark = build_session(SparkSettings(warehouse=root / "warehouse"))
        try:
            spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.b")
            for rows in sizes:
                name = f"lake.b.t{rows}"
                frame = spark.range(rows).selectExpr("id", "id % 97 AS a", "uuid() AS s")
                writer = frame.writeTo(name).using("iceberg")
                for key, value in TABLE_PROPERTIES.items():
                    writer = writer.tableProperty(key, value)
                writer.createOrReplace()
                spark.sql(f"SELECT sum(id) FROM {name}").collect()  # warm
                started = time.perf_counter()
                spark.sql(f"SELECT sum(id) FROM {name}").collect()
                read_s = time.perf_counter() - started
                target = RowDeltaWriter(spark).open(name, ("id",), f"b.t{rows}")
                positions = KeyPositions(spark, root / f"keyindex{rows}", lambda _error: None)
                started = time.perf_counter()
                batch = positions.begin(target, f"b.t{rows}")
                rebuild_s = time.perf_counter() - started
                positions.end(batch, None)
                size = sum(f.stat().st_size for f in (root / f"keyindex{rows}").rglob("*"))
                positions.close()
                print(
                    f"rows {rows:,}: rebuild with Spark's read {rebuild_s:.1f} s; Spark's read "
                    f"of the key column alone {read_s:.1f} s: ratio {rebuild_s / read_s:.1f}x; "
                    f"index {size / rows:.1f} bytes/row on disk",
                    flush=True,
                )
        finally:
            stop_session(spark)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", default="1000000,10000000")
    parser.add_argument("--lookups", type=int, default=200_000)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--batch-keys", type=int, default=BATCH)
    parser.add_argument("--batch-fresh", type=float, default=0.5, help="share of new keys")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--spark-rows", help="sizes of the rebuild with Spark's read instead")
    parser.add_argument("--follow", help="sizes: catch-up after a whole compaction vs rebuild")
    args = parser.parse_args()
    if args.follow:
        for count in (int(n) for n in args.follow.split(",")):
            follow(count)
        return
    if args.spark_rows:
        spark_rebuilds([int(n) for n in args.spark_rows.split(",")])
        return
    if args.child:
        shape = (args.batch_keys, args.batch_fresh)
        result = work(args.child, int(args.keys), args.lookups, args.batches, shape)
        print(json.dumps(result))
        return
    os.environ.setdefault("PYTHONHASHSEED", "0")
    for count in (int(k) for k in args.keys.split(",")):
        measure(count, args.lookups, args.batches, (args.batch_keys, args.batch_fresh))


if __name__ == "__main__":
    main()
