"""What the commits since a key index's snapshot did to a table: the plan of its catch-up.

``plan_catch_up(target, since)``: the snapshots from ``since`` (exclusive) to the table's base
snapshot B (inclusive), walked back from B through the parent ids (``Table.snapshot``; no Spark
job: the manifests each snapshot added are read, and the position deletes it added, so the cost
is what those commits changed). Oldest first, each one's data files removed and added, and its
delete files added or removed:

* a data file removed: its entries go;
* a data file added: its live rows are read at B (``key_reads.read_entries``);
* a position delete added (a deletion vector, or a Parquet position-delete file): the rows it
  deletes, as (data file, position), read from the delete itself; their entries go
  (``KeyIndex.remove_at``: an entry is removed only if it still names that row, so a key whose
  row moved keeps its new entry). No data file is read again: a batch's delete of random keys
  names most of a big table's files, and reading them again cost the next batch a read of the
  table (150 s at 10 M rows);
  Past ``MAX_DELETED_ROWS`` such rows in one catch-up, their data files are read again
  instead (memory stays bounded);
* a position delete removed: the rows it deleted may live again, so each data file it names is
  read again at B, its entries dropped first; a file that is not live at B (a dangling delete
  removed: its data file went before ``since``, so the index holds nothing of it) is only
  dropped. But a deletion vector (or a delete scoped to one data file) removed by a commit that
  added a deletion vector for the same data file holding every position it held (a merge, as
  binlake's batches on a format-v3 table do) deletes nothing the new one does not: only the new
  one's positions count (one that cannot be read: its data file is read again);
* a ``replace`` snapshot (a compaction, a merge of delete files, dangling deletes removed:
  Iceberg's ``DataOperations.REPLACE``, files replaced without changing the table's rows): only
  its data files count (removed: dropped; added: read); the delete files it added or removed
  change no live row;
* a position delete file binlake does not read (neither a deletion vector nor Parquet): the one
  data file it names is read again at B;
* an equality delete added or removed, such a file naming several data files, a lineage that
  does not lead back to ``since`` (expired snapshots, a rollback, another table) or runs longer
  than ``MAX_CATCH_UP``: the index is rebuilt instead (``CatchUp.rebuild``).

``CatchUp.moved_rows`` counts the rows of the data files the commits added that are still live
at B (a compaction's output, a batch's new rows): its caller rebuilds instead when that is most
of the index (``key_positions``), which costs less than dropping and putting each entry.

``rows_unmoved``: whether commits replaced delete files and nothing else (an index exact before
them is exact after them).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession

from binlake.errors import DeletionVectorError
from binlake.lake.spark.errors import spark_errors
from binlake.lake.spark.lookup import java_items
from binlake.lake.write.row_delta import DeltaTable
from binlake.lake.write.vector_files import delete_positions, named_data_files

JavaObject = Any
#: Snapshots a catch-up walks at most; a longer lineage is rebuilt (a read of the table).
MAX_CATCH_UP = 2000
#: Iceberg's ``DataOperations.REPLACE``: a commit that replaced files, not rows.
REPLACE = "replace"
#: Rows deleted by position a catch-up holds at most (about 70 bytes each in Python sets);
#: beyond, the data files they are in are read again instead (a long lineage of big deletes).
MAX_DELETED_ROWS = 2_000_000


@dataclass
class CatchUp:
    """What the commits since the index's snapshot did to the table's data files."""

    #: Data files whose entries go (removed, or to be read again).
    dropped: set[str] = field(default_factory=set)
    #: Data files live at B whose rows are read again.
    read: set[str] = field(default_factory=set)
    #: Of ``read``, the files only a removed delete names: read if live at B, else only dropped.
    optional: set[str] = field(default_factory=set)
    #: Rows deleted by position in data files neither dropped nor read again: path -> positions.
    deleted: dict[str, set[int]] = field(default_factory=dict)
    #: Why the index cannot follow the commits (None: it can).
    rebuild: str | None = None
    #: Rows of the data files added since ``since`` and live at B (their record counts).
    moved_rows: int = 0


def plan_catch_up(
    spark: SparkSession, target: DeltaTable, since: int | None, table: str
) -> CatchUp:
    """The catch-up from snapshot ``since`` to ``target``'s base snapshot (see the module
    docstring)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    with spark_errors(f"read the commits of {target.name}", table):
        chain = _lineage(target.java, since, target.base_snapshot)
        if isinstance(chain, str):
            return CatchUp(rebuild=chain)
        commits = _Commits(jvm.org.apache.iceberg.util.ContentFileUtil, target, table)
        for snapshot in reversed(chain):  # oldest first
            reason = commits.follow(snapshot)
            if reason is not None:
                return CatchUp(rebuild=reason)
    return commits.plan()


class _Commits:
    """The changes of a lineage of commits, taken in oldest first."""

    def __init__(self, util: JavaObject, target: DeltaTable, table: str) -> None:
        self.util, self.io, self.table = util, target.java.io(), table
        self.removed: set[str] = set()
        self.added: dict[str, int] = {}
        #: Data files a removed delete named: read again.
        self.named: set[str] = set()
        self.deleted: dict[str, set[int]] = {}
        #: Positions in ``deleted`` (past ``MAX_DELETED_ROWS``: none kept, every file read).
        self.held = 0

    def follow(self, snapshot: JavaObject) -> str | None:
        """Take in one commit; why the index cannot follow it (None: it can)."""
        self.removed |= {str(f.location()) for f in java_items(snapshot.removedDataFiles(self.io))}
        for data_file in java_items(snapshot.addedDataFiles(self.io)):
            self.added[str(data_file.location())] = int(data_file.recordCount())
        if str(snapshot.operation()) == REPLACE:
            return None
        new = list(java_items(snapshot.addedDeleteFiles(self.io)))
        gone = list(java_items(snapshot.removedDeleteFiles(self.io)))
        if any(str(f.content().toString()) != "POSITION_DELETES" for f in new + gone):
            return "a commit added or removed equality deletes"
        now: dict[str, set[int]] = {}
        for delete_file in new:
            if not self._readable(delete_file):  # read again what it names, if one data file
                reason = self._name_one(
                    delete_file, self.util.referencedDataFileLocation(delete_file)
                )
                if reason is not None:
                    return reason
                continue
            for path, found in self._positions(delete_file):
                now.setdefault(path, set()).update(found)
        for delete_file in gone:
            reason = self._removed(delete_file, now)
            if reason is not None:
                return reason
        if self.held + sum(map(len, now.values())) > MAX_DELETED_ROWS:
            self.named |= set(self.deleted) | set(now)  # too many to hold: read them again
            self.deleted.clear()
            self.held = MAX_DELETED_ROWS + 1
            return None
        for path, deleted in now.items():
            self.deleted.setdefault(path, set()).update(deleted)
            self.held += len(deleted)
        return None

    def _removed(self, delete_file: JavaObject, now: dict[str, set[int]]) -> str | None:
        """A removed delete: nothing to do when a new deletion vector of its one data file holds
        all it held; else the data files it names are read again."""
        single = self.util.referencedDataFileLocation(delete_file)
        if single is not None and str(single) in now and self._readable(delete_file):
            path = str(single)
            try:
                held = {p for _, at in self._positions(delete_file, [path]) for p in at}
            except DeletionVectorError:  # unreadable: its data file is read again instead
                held = None
            if held is not None and held <= now[path]:
                return None
        if single is not None or not self._readable(delete_file):
            return self._name_one(delete_file, single)
        self.named |= named_data_files(self.io, str(delete_file.location()), self.table)
        return None

    def _name_one(self, delete_file: JavaObject, single: JavaObject) -> str | None:
        """Read again ``single``, the one data file ``delete_file`` names; why not (None: it
        names several)."""
        if single is None:
            return f"a position delete file in {delete_file.format()} names several data files"
        self.named.add(str(single))
        return None

    def _readable(self, delete_file: JavaObject) -> bool:
        return bool(self.util.isDV(delete_file)) or str(delete_file.format()) == "PARQUET"

    def _positions(
        self, delete_file: JavaObject, data_files: Iterable[str] | None = None
    ) -> list[tuple[str, list[int]]]:
        wanted = None if data_files is None else set(data_files)
        found = delete_positions(self.util, self.io, delete_file, wanted, self.table)
        return [(path, list(positions)) for path, positions in found]

    def plan(self) -> CatchUp:
        touched = set(self.added) | self.named
        dropped = self.removed | touched
        return CatchUp(
            dropped=dropped,
            read=touched - self.removed,
            optional=self.named - set(self.added) - self.removed,
            deleted={p: at for p, at in self.deleted.items() if p not in dropped},
            moved_rows=sum(n for path, n in self.added.items() if path not in self.removed),
        )


def rows_unmoved(java: JavaObject, since: int, upto: int | None) -> bool:
    """Whether every commit after ``since`` up to ``upto`` (of Iceberg's ``Table`` ``java``)
    replaced delete files and nothing else: a ``replace`` that added and removed no data file
    (maintenance merging position deletes or removing dangling ones). Every live row is then
    where it was at ``since``, so an index exact at ``since`` is exact at ``upto``."""
    chain = _lineage(java, since, upto)
    if isinstance(chain, str):
        return False
    io_ = java.io()
    return all(
        str(snapshot.operation()) == REPLACE
        and _empty(snapshot.addedDataFiles(io_))
        and _empty(snapshot.removedDataFiles(io_))
        for snapshot in chain
    )


def _empty(files: JavaObject) -> bool:
    return not files.iterator().hasNext()


def _lineage(java: JavaObject, since: int | None, base: int | None) -> list[JavaObject] | str:
    """The snapshots after ``since`` up to ``base``, newest first, or why there is none."""
    if since is None:
        return "the index was made before the table's first commit"
    chain = []
    at = base
    while at != since:
        snapshot = None if at is None else java.snapshot(at)
        if snapshot is None:
            return (
                f"the index's snapshot {since} is not an ancestor of the table's snapshot "
                f"{base} (expired, rolled back, or another table's)"
            )
        chain.append(snapshot)
        if len(chain) > MAX_CATCH_UP:
            return f"more than {MAX_CATCH_UP} commits since the index's snapshot"
        parent = snapshot.parentId()
        at = None if parent is None else int(parent)
    return chain
