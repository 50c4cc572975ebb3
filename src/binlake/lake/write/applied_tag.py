"""Tags that keep a table's applied position through any snapshot expiry (docs/recovery.md).

A table's applied position is the ``binlake.position`` of the newest binlake snapshot in its
main branch's lineage. A user's ``rewrite_data_files`` then ``expire_snapshots(retain_last =>
1)`` cuts that lineage above every binlake snapshot. So binlake keeps its newest snapshot
referenced by the tag ``binlake-applied`` (``expire_snapshots`` never removes a snapshot a tag
references), and its newest snapshot copy's last chunk by ``binlake-copy`` (where the table
starts to equal the source, ``metadata.copy_bound``). A lineage cut above every binlake
snapshot then ends with the tagged snapshots (``tagged_tail``): the user's commits above them
changed files, not rows, and inherit their position.

The rule that makes it exact: **whenever ``binlake-applied`` exists, it references the newest
binlake snapshot ever committed to main.** Never an older one (its position would make binlake
apply again transactions the table holds: doubled rows).

* Commits made through Iceberg's Java API (row deltas, snapshot chunks) move the tags in the
  same ``Transaction`` as the data: one metadata swap (``move_tags``).
* Commits made by Spark SQL or a DataFrame write (MERGE, change-log appends, DDL backfills,
  table actions) cannot share their metadata swap: ``tag_follows`` removes the tag before the
  commit and sets it after. A crash between the two leaves no tag, never a stale one: while the
  lineage is whole the position is read from it as always (the next commit sets the tag again);
  if an expiry cut it meanwhile, the position is unknown (fail closed), never guessed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from pyspark.sql import SparkSession

from binlake.crashpoints import crash_point
from binlake.lake.catalog.metadata import APPLIED_TAG, COPY_TAG
from binlake.lake.catalog.snapshot_progress import SNAPSHOT
from binlake.lake.catalog.summary import POSITION
from binlake.lake.spark.errors import spark_errors
from binlake.lake.spark.lookup import load_table


def tags_for(summary: Mapping[str, str]) -> tuple[str, ...]:
    """The tags a binlake snapshot with ``summary`` takes."""
    if POSITION not in summary:
        return ()
    return (APPLIED_TAG, COPY_TAG) if SNAPSHOT in summary else (APPLIED_TAG,)


def move_tags(operations: Any, table: Any, snapshot_id: int, summary: Mapping[str, str]) -> None:
    """Point the tags ``summary`` takes at ``snapshot_id``. ``operations`` is an Iceberg
    ``Table`` or ``Transaction`` (in a transaction the move is part of its one commit),
    ``table`` the table as it sees it (the transaction's ``table()``)."""
    tags = tags_for(summary)
    if not tags:
        return
    refs = table.refs()
    manage = operations.manageSnapshots()
    for tag in tags:
        if refs.containsKey(tag):
            manage = manage.replaceTag(tag, snapshot_id)
        else:
            manage = manage.createTag(tag, snapshot_id)
    manage.commit()


def newest_binlake_snapshot(table: Any) -> Any | None:
    """The newest snapshot with a position among main's snapshot and its ancestors."""
    snapshot = table.currentSnapshot()
    while snapshot is not None:
        if snapshot.summary().containsKey(POSITION):
            return snapshot
        parent = snapshot.parentId()
        snapshot = None if parent is None else table.snapshot(parent)
    return None


@contextmanager
def tag_follows(spark: SparkSession, name: str, table: str | None = None) -> Iterator[None]:
    """Around one commit to ``name`` made by Spark SQL or a DataFrame write: ``binlake-applied``
    removed before it, moved to the newest binlake snapshot after it (``table``: for messages).
    A commit that fails leaves the tag removed until the next one."""
    with spark_errors(f"remove the {APPLIED_TAG} tag of {name}", table):
        java = load_table(spark, name)
        if java.refs().containsKey(APPLIED_TAG):
            java.manageSnapshots().removeTag(APPLIED_TAG).commit()
    yield
    crash_point("lake_before_tag_move")
    with spark_errors(f"move the {APPLIED_TAG} tag of {name}", table):
        java.refresh()
        newest = newest_binlake_snapshot(java)
        if newest is not None:
            summary = {str(k): str(v) for k, v in dict(newest.summary()).items()}
            move_tags(java, java, int(newest.snapshotId()), summary)
