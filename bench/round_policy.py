"""A candidate maintenance round, not binlake's: bench/maintain.py's ``live`` section with each
scheduled round replaced by one that never rewrites the large files.

binlake's round (``binlake.maintain``) compacts a table by rewriting every data file a delete
reaches; with random keys that is the whole table, every round. The round tried here instead:

1. ``convert``: the table's equality deletes replaced by position deletes in one commit
   (bench/deletes.py ``convert``: a Spark join of the deleted keys with every older data file's
   key column, read raw with its row positions);
2. ``compact`` (so named in the output, as binlake's is, for the sum of the bytes rewritten):
   Iceberg's ``RewriteDataFiles`` on the files under 4 MB only (the batches' files:
   ``min-file-size-bytes`` 4 MB, ``min-input-files`` 2, no file chosen for its deletes);
3. ``merge-positions``: Iceberg's ``RewritePositionDeleteFiles`` over all position-delete files
   (``rewrite-all``), which also drops positions of files no longer in the table;
4. ``expire``: binlake's own expiry step (the applied position's tag and the cuts kept).

Only the ``live`` section (the default here). A failing step is printed and the round goes on.
After the run, once replication has caught up, the live table is compared with the source
(row count, ``sum(a)``, ``sum(crc32(s))``).

The options are bench/maintain.py's; the comparison is its ``live`` section with the same
options, run after this one:

    .venv/bin/python bench/round_policy.py --sections live --rows 10000000 --minutes 10 \\
        --runs on --schedule-s 15 --sample-s 30
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import maintain as bench
from binlake.binlog.names import TableName
from binlake.lake.schema.sql import quote
from binlake.lake.tables.maintenance import load_table, rewrite_action, table_health
from binlake.maintain.plan import Planned, Step
from binlake.maintain.runner import Maintainer, StepRun, TableReport
from deletes import convert

#: Files under this size are compacted (the batches' files; the preloaded ones are larger).
SMALL_BYTES = 4 << 20
SMALL_FILES = {
    "min-file-size-bytes": str(SMALL_BYTES),
    "min-input-files": "2",
    "delete-file-threshold": str(2**31 - 1),
}


def compact_small(spark: Any, name: str) -> dict[str, int]:
    action = rewrite_action(spark, name)  # binlake's compaction, then these options over it
    for key, value in SMALL_FILES.items():
        action = action.option(key, value)
    result = action.execute()
    return {
        "rewritten_data_files_count": int(result.rewrittenDataFilesCount()),
        "rewritten_bytes_count": int(result.rewrittenBytesCount()),
    }


def merge_positions(spark: Any, name: str) -> dict[str, int]:
    jvm = spark.sparkContext._jvm
    jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
    actions = jvm.org.apache.iceberg.spark.actions.SparkActions.get(spark._jsparkSession)
    action = actions.rewritePositionDeletes(load_table(spark, name)).option("rewrite-all", "true")
    result = action.execute()
    return {
        "rewritten_delete_files": int(result.rewrittenDeleteFilesCount()),
        "added_delete_files": int(result.addedDeleteFilesCount()),
    }


def timed(report: TableReport, label: str, work: Any) -> None:
    """Run one step into ``report`` under ``label``; a failure is printed and counted."""
    started = time.monotonic()
    try:
        counts = work() or {}
    except Exception as exc:  # a conflict with a batch: printed, tried again next round
        counts = {"failed": 1}
        bench.say(f"    {label} failed: {exc!r:.400}")
    planned: Any = SimpleNamespace(step=SimpleNamespace(value=label), reason="")
    report.runs.append(StepRun(planned, counts, time.monotonic() - started))


def candidate_round(
    self: Maintainer, table: TableName, *, dry_run: bool = False, orphans_due: bool = True
) -> TableReport:
    name = self.target.lake_table(table)
    catalog_name = ".".join(quote(p) for p in (self.target.catalog, *self.target.identifier(table)))
    report = TableReport(table, name, table_health(self.spark, name, SMALL_BYTES), [])
    timed(
        report,
        "convert",
        lambda: dict(zip(("equality_files", "positions"), convert(self.spark, name), strict=True)),
    )
    timed(report, "compact", lambda: compact_small(self.spark, catalog_name))
    timed(report, "merge-positions", lambda: merge_positions(self.spark, catalog_name))
    timed(report, "expire", lambda: self._step(table, Planned(Step.EXPIRE, "every round")))
    return report


def exact_live_run(
    live: Any, name: str, config: Path, rows: int, fresh: str
) -> tuple[list[float], dict[str, list[float]]]:
    """bench/maintain.py's ``live_run``, then the live table against the source."""
    out = LIVE_RUN(live, name, config, rows, fresh)
    bench.replicate(config, live.spark)  # caught up
    query = f"SELECT count(*), sum(a), sum(crc32(s)) FROM {{}}bench.{name}"
    source = tuple(int(v) for v in live.source.sandbox.execute(query.format(""))[0])
    live.spark.sql(f"REFRESH TABLE lake.bench.{name}")
    lake = tuple(int(v) for v in live.spark.sql(query.format("lake.")).collect()[0])
    verdict = "the same" if source == lake else "DIFFERENT"
    bench.say(f"  source {source}, lake {lake}: {verdict}")
    assert source == lake, "the candidate round lost or doubled rows"
    return out


LIVE_RUN = bench.live_run

if __name__ == "__main__":
    sections = [a for a in sys.argv[1:] if a.startswith("--sections")]
    if sections not in ([], ["--sections"], ["--sections=live"]) or (
        sections == ["--sections"] and sys.argv[sys.argv.index("--sections") + 1] != "live"
    ):
        sys.exit("bench/round_policy.py: only the live section (the commits section is binlake's)")
    if not sections:
        sys.argv[1:1] = ["--sections", "live"]
    bench.live_run = exact_live_run
    Maintainer.maintain = candidate_round  # type: ignore[method-assign]
    bench.main()
