"""The cuts table: consistent cuts (``binlake.cuts``) recorded in an Iceberg table of the target
catalog, ``[cuts] table`` (default ``binlake.cuts``), so that any reader with the config finds
them (docs/format.md, "The cuts table").

* ``append``: one cut, one row, one Iceberg commit through the row-delta machinery
  (``binlake.lake.write.row_delta``: a small Parquet file and an append, no Spark job);
* ``read``: every cut (a Spark query; an absent table holds none);
* ``keep_only``: retention: the retained cuts rewritten into one file (``INSERT OVERWRITE``, one
  commit: a reader sees the cuts before or after it), then the table's own older snapshots
  expired (nobody reads the cuts table at an older version);
* ``protect``: the ``binlake-cut-<id>`` tags on a replicated table's snapshots that retained
  cuts name, so that snapshot expiry keeps them (``binlake.maintain``); tags of snapshots no
  retained cut names are removed.

And the readers' side of a cut: ``lineage_state`` (what a table's lineage says it holds, for
the applier's recorder), ``version_sql`` and ``register_views``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

from binlake.cuts import CATCHING_UP, COLUMNS, COPYING, Cut
from binlake.lake.catalog.metadata import NEVER, LakeLineage, copy_bound, exact_at
from binlake.lake.catalog.target import LakeTarget
from binlake.lake.schema.sql import quote
from binlake.lake.spark.errors import spark_errors
from binlake.lake.spark.lookup import load_table, table_exists
from binlake.lake.write.commit import execute_with_commit_properties
from binlake.lake.write.row_delta import RowDeltaWriter
from binlake.position import SourcePosition

#: Tags that keep the snapshots retained cuts name (``binlake-cut-<snapshot id>``).
CUT_TAG_PREFIX = "binlake-cut-"
#: The snapshot summary key holding the newest cut (as its row's JSON).
LATEST = "binlake.cut"
_ARROW = {"BIGINT": pa.int64(), "STRING": pa.string()}


def cut_json(cut: Cut) -> str:
    return json.dumps(cut.row(), separators=(",", ":"))


def cuts_table_name(target: LakeTarget, identifier: tuple[str, str]) -> str:
    return ".".join(quote(p) for p in (target.catalog, *identifier))


class CutsTable:
    """The cuts table of one target (``identifier``: ``[cuts] table`` as namespace, table)."""

    def __init__(self, spark: SparkSession, target: LakeTarget, identifier: tuple[str, str]):
        self.spark = spark
        self.target = target
        self.name = cuts_table_name(target, identifier)
        self._namespace = ".".join(quote(p) for p in (target.catalog, identifier[0]))
        self._writer: RowDeltaWriter | None = None
        self._created = False

    def exists(self) -> bool:
        return table_exists(self.spark, self.name)

    def _ensure(self) -> None:
        if self._created:
            return
        columns = ", ".join(f"{quote(n)} {t} NOT NULL" for n, t in COLUMNS)
        for statement in (
            f"CREATE NAMESPACE IF NOT EXISTS {self._namespace}",
            f"CREATE TABLE IF NOT EXISTS {self.name} ({columns}) USING iceberg "
            "TBLPROPERTIES ('format-version' = '2', 'write.metadata.delete-after-commit"
            ".enabled' = 'true', 'write.metadata.previous-versions-max' = '20')",
        ):
            with spark_errors(statement, self.name):
                self.spark.sql(statement)
        self._created = True

    def read(self) -> list[Cut]:
        """Every cut the table holds (none when there is no table yet)."""
        if not self.exists():
            return []
        statement = f"SELECT * FROM {self.name}"
        with spark_errors(statement, self.name):
            rows = self.spark.sql(statement).collect()
        return sorted((Cut.from_row(r.asDict()) for r in rows), key=lambda c: c.cut_id)

    def append(self, cut: Cut) -> None:
        """Record ``cut``: one commit adding one row."""
        self._ensure()
        if self._writer is None:
            self._writer = RowDeltaWriter(self.spark)
        row = cut.row()
        rows = pa.table({n: pa.array([row[n]], _ARROW[t]) for n, t in COLUMNS})
        delta = self._writer.open(self.name, (), self.name)
        staged = self._writer.stage(delta, [(rows, pa.table({}))], self.name)
        self._writer.commit(staged, {LATEST: cut_json(cut)}, self.name)

    def latest(self) -> Cut | None:
        """The newest cut, from the table's current snapshot summary (``binlake.cut``: every
        commit carries the newest cut), without a Spark job; None when there is none (or an
        older binlake's table: ``read`` then)."""
        if not self.exists():
            return None
        with spark_errors(f"load {self.name}", self.name):
            snapshot = load_table(self.spark, self.name).currentSnapshot()
            text = None if snapshot is None else snapshot.summary().get(LATEST)
        return None if text is None else Cut.from_row(json.loads(str(text)))

    def keep_only(self, cut_ids: Collection[int], newest: Cut) -> None:
        """Rewrite the table with the cuts ``cut_ids`` only (``newest`` among them), in one
        commit, then expire its own older snapshots."""
        kept = ", ".join(str(i) for i in sorted(cut_ids)) or "NULL"
        statement = (
            f"INSERT OVERWRITE {self.name} SELECT * FROM {self.name} WHERE cut_id IN ({kept})"
        )
        execute_with_commit_properties(self.spark, statement, {LATEST: cut_json(newest)}, self.name)
        with spark_errors(f"expire the older snapshots of {self.name}", self.name):
            table = load_table(self.spark, self.name)
            now_ms = int(time.time() * 1000) + 1
            table.expireSnapshots().expireOlderThan(now_ms).retainLast(1).commit()


@dataclass(frozen=True)
class TableState:
    """What a replicated table's lineage says it holds: the position and snapshot of its
    newest binlake snapshot, or why it equals the source at no position (``pending``)."""

    position: SourcePosition | None
    snapshot: int | None
    pending: str | None


def lineage_state(lineage: LakeLineage) -> TableState:
    """The table's newest binlake snapshot holds it exactly at that snapshot's position unless a
    copy runs (``COPYING``) or the table has not reached its copy's position (``CATCHING_UP``)."""
    newest = lineage.latest_binlake
    if newest is None or newest.position is None:
        return TableState(None, None, "no binlake commit yet")
    bound = copy_bound((s.summary for s in lineage.lineage), cut=lineage.lineage_cut)
    if bound == NEVER:
        return TableState(newest.position, None, COPYING)
    if not exact_at(bound, newest.position):
        return TableState(newest.position, None, CATCHING_UP)
    return TableState(newest.position, newest.snapshot_id, None)


def protect(spark: SparkSession, name: str, snapshots: Collection[int]) -> int:
    """Tag ``snapshots`` of the table ``name`` (those it still has) ``binlake-cut-<id>`` and
    remove the cut tags of any other snapshot, in one commit; the number of tags set."""
    with spark_errors(f"tag the snapshots cuts name in {name}", name):
        table = load_table(spark, name)
        refs = {str(k) for k in table.refs().keySet()}
        have = {int(s.snapshotId()) for s in table.snapshots()}
        wanted = {f"{CUT_TAG_PREFIX}{s}": s for s in snapshots if s in have}
        manage: Any = table.manageSnapshots()
        changed = False
        for tag in refs:
            if tag.startswith(CUT_TAG_PREFIX) and tag not in wanted:
                manage, changed = manage.removeTag(tag), True
        for tag, snapshot in wanted.items():
            if tag not in refs:
                manage, changed = manage.createTag(tag, snapshot), True
        if changed:
            manage.commit()
        return len(wanted)


def version_sql(target: LakeTarget, identifier: tuple[str, ...], snapshot: int) -> str:
    """The Spark SQL that reads a table at one snapshot."""
    name = ".".join(quote(p) for p in (target.catalog, *identifier))
    return f"SELECT * FROM {name} VERSION AS OF {snapshot}"
