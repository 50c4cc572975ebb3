"""Position deletes for a keyed table's row delta, from its key index.

``KeyPositions`` keeps the key indexes of one applier (``binlake.keyindex``: one SQLite file per
lake table in ``<state dir>/keyindex/``). A batch of a table (``KeyedWriter``):

1. ``begin(target)``: the table was loaded at its base snapshot B; the index is made to match B
   (``_matching``): used as it is when its snapshot is B; caught up when its snapshot is an
   ancestor of B (``catch_up.plan_catch_up``: the entries of the data files the commits since
   removed go, and of the rows they deleted by position; the data files they added are read at
   B; in one SQLite transaction that moves the index's snapshot to B); rebuilt from a read of
   the whole table at B when it is missing, damaged, of another table or key, behind in a way
   a catch-up cannot follow, or when the commits since moved most of its rows (a compaction of
   most of the table: ``REBUILD_MOVED_ROWS``; a rebuild costs less than dropping and putting
   every entry). Each rebuild is reported through ``notice`` (a typed warning, counted in a
   metric by reason). A table without a snapshot gets an empty index, silently.
2. ``BatchPositions.chunk`` per staged chunk: every key the chunk upserts or deletes is looked
   up; the rows found are the batch's position deletes, their entries go, and each upserted
   row's entry is its position in the batch's new data file. All of it in one open SQLite
   transaction.
3. The caller commits the row delta (snapshot S'), then ``BatchPositions.commit(S')``: the
   transaction commits with the index's snapshot at S', when S' went on top of B, or on top of
   commits that only replaced delete files (``committed_at``: maintenance merging or pruning
   deletes beside the batches moves no row). Anything else (a conflict, a crash before, at
   ``keyindex_after_delta_commit`` included, or S' put on top of another writer's commit that
   added or removed data files, by Iceberg's retry) leaves the index at B, which the next batch
   catches up from (over every commit since).

A damaged entry met in the middle of a batch (``KeyIndexUntrustedError`` from a lookup) ends the
batch's transaction; ``distrust`` removes the index, and the caller stages the batch again on a
rebuilt one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa
from pyspark.sql import SparkSession

from binlake.errors import BinlakeError, KeyIndexUntrustedError
from binlake.keyindex.encode import encode_keys, key_spec
from binlake.keyindex.folder import IndexFolder
from binlake.keyindex.open_set import OpenIndexes
from binlake.keyindex.store import IndexedFile, KeyIndex, untrusted
from binlake.lake.spark.errors import spark_errors
from binlake.lake.write.catch_up import CatchUp, plan_catch_up, rows_unmoved
from binlake.lake.write.delta_files import (
    DeltaLayout,
    NewRows,
    PositionDeletes,
    position_deletes,
)
from binlake.lake.write.key_reads import read_entries
from binlake.lake.write.partitions import FilePartition
from binlake.lake.write.row_delta import Committed, DeltaTable

#: Told of every index that is rebuilt, with why (the typed warning).
Notice = Callable[[KeyIndexUntrustedError], None]
#: A catch-up that would put at least this many entries, and more than half the index's, is a
#: rebuild instead: at 1 M keys, following a compaction of every row took 1.7x as long caught
#: up as rebuilt (``bench/keyindex.py --follow``, docs/benchmarks.md, "The key index").
REBUILD_MOVED_ROWS = 1_000_000


def layout_key_spec(layout: DeltaLayout) -> str:
    by_name = {c.name: c for c in layout.columns}
    return key_spec([(by_name[name].field_id, by_name[name].type) for name in layout.key])


class BatchPositions:
    """One batch's lookups and index changes (an open transaction of ``index``); the
    ``delta_files.PositionLookup`` a row delta is staged with."""

    def __init__(self, index: KeyIndex, key: Sequence[str], *, look_up_new: bool = False) -> None:
        self.index = index
        self.key = tuple(key)
        #: Look up the upserted keys not in ``deleted`` too (after ``KeyIndexDuplicateKeyError``).
        self.look_up_new = look_up_new
        self._files: list[int] = []
        self._positions: list[int] = []

    def chunk(self, rows: Sequence[NewRows], deleted: pa.Table | None) -> None:
        """Look up the keys the lake may hold (``deleted``: every key of the chunk whose older
        row must go, upserted again or not; each key in one chunk only): the rows found are
        deleted by position; an upserted key's entry moves to its new row, a key only deleted
        leaves. An upserted key not in ``deleted`` cannot be in the lake
        (``KeyedChanges.lake_exact``): it is not looked up, it gets an entry; if the index held
        it (another writer's row), ``KeyIndexDuplicateKeyError``, and the caller stages the
        batch again with ``look_up_new``, which looks up every key."""
        upserted = [self._keys(new.rows) for new in rows]
        new_keys = {key for keys in upserted for key in keys}
        wanted = self._keys(deleted)
        found = self.index.lookup(list(new_keys.union(wanted)) if self.look_up_new else wanted)
        for file, pos in found.values():
            self._files.append(file)
            self._positions.append(pos)
        self.index.remove([key for key in found if key not in new_keys])
        for new, keys in zip(rows, upserted, strict=True):
            data = IndexedFile(new.location, new.partition.spec_id, new.partition.values)
            moved: tuple[list[bytes], list[int]] = ([], [])
            added: tuple[list[bytes], list[int]] = ([], [])
            for pos, key in enumerate(keys, start=new.first_row):
                into = moved if key in found else added
                into[0].append(key)
                into[1].append(pos)
            self.index.move(data, *moved)
            self.index.put(data, *added)

    def _keys(self, table: pa.Table | None) -> list[bytes]:
        if table is None or not table.num_rows:
            return []
        return encode_keys([table.column(name) for name in self.key])

    def deletes(self) -> list[PositionDeletes]:
        """The rows found, one group per partition of the data files they are in; first, the
        index's whole-file check confirmed (``KeyIndex.confirm``): nothing it answered is
        committed before."""
        self.index.confirm()
        files = self.index.files(self._files)
        groups: dict[FilePartition, tuple[list[str], list[int]]] = {}
        for file, pos in zip(self._files, self._positions, strict=True):
            data = files[file]
            paths, positions = groups.setdefault(FilePartition(data.spec, data.partition), ([], []))
            paths.append(data.path)
            positions.append(pos)
        return [
            PositionDeletes(
                partition, position_deletes(paths, positions), tuple(sorted(set(paths)))
            )
            for partition, (paths, positions) in groups.items()
        ]

    @property
    def found(self) -> int:
        """Rows the batch deletes by position."""
        return len(self._positions)


class KeyPositions:
    """The key indexes of one applier (see the module docstring); thread-safe: a batch's tables
    commit on several threads, each table's batches one at a time."""

    def __init__(
        self, spark: SparkSession, folder: Path, notice: Notice, budget: int = 1 << 20
    ) -> None:
        self.spark = spark
        self.folder = IndexFolder(folder)
        self.notice = notice
        #: Open indexes, at most ``budget`` (``storage.open_files.index_budget``).
        self.open = OpenIndexes(budget)
        #: Tables whose index ``distrust`` removed (told once, not again as missing).
        self._distrusted: set[str] = set()
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def begin(self, target: DeltaTable, table: str, *, look_up_new: bool = False) -> BatchPositions:
        """The batch's lookups on the table's index, made to match ``target``'s base snapshot,
        in an open transaction (``look_up_new``: ``BatchPositions.look_up_new``); ``end`` it
        (always)."""
        uuid = _uuid(target, table)
        lock = self._lock(uuid)
        lock.acquire()
        try:
            index = self._matching(uuid, target, table)
            index.begin()
        except BaseException:
            lock.release()
            raise
        return BatchPositions(index, target.layout.key, look_up_new=look_up_new)

    def end(self, batch: BatchPositions, snapshot: int | None) -> None:
        """End ``batch``: commit its changes with the index at ``snapshot`` (the row delta's
        commit), or, with None, roll them back (the index stays at the base snapshot)."""
        uuid = batch.index.meta.table_uuid
        try:
            if snapshot is None:
                batch.index.rollback()
            else:
                batch.index.commit(snapshot)
        finally:
            self._lock(uuid).release()

    def committed_at(self, target: DeltaTable, committed: Committed, table: str) -> int | None:
        """The snapshot a batch's index changes are exact at once its row delta is
        ``committed``: the delta's own when it went on top of the base, or on top of commits
        that replaced delete files only (maintenance beside the batches: ``rows_unmoved``);
        else None (another writer moved or changed rows: the next batch catches up)."""
        base = target.base_snapshot
        if committed.follows(base):
            return committed.snapshot
        if base is None or committed.table is None:
            return None
        try:
            with spark_errors(f"read the commits of {target.name}", table):
                unmoved = rows_unmoved(committed.table, base, committed.parent)
        except BinlakeError:  # unread, the index stays at the base: the safe side
            return None
        return committed.snapshot if unmoved else None

    def distrust(self, target: DeltaTable, error: KeyIndexUntrustedError, table: str) -> None:
        """The table's index failed a check mid-batch: report it and remove it (the next
        ``begin`` rebuilds it)."""
        uuid = _uuid(target, table)
        with self._lock(uuid):
            self._tell(error, table)
            self._forget(uuid)
            self.folder.discard(uuid)
            self._distrusted.add(uuid)

    def close(self) -> None:
        with self._guard:
            self.open.close_all()

    # ---- the index at the base snapshot ----------------------------------------------------

    def _matching(self, uuid: str, target: DeltaTable, table: str) -> KeyIndex:
        spec = layout_key_spec(target.layout)
        with self._guard:
            index = self.open.get(uuid)
            checked = uuid in self.open.checked
        if index is not None and index.meta.key_spec != spec:
            self._tell(untrusted(index.path, "key changed", "the table's key changed"), table)
            self._forget(uuid)
            index = None
        if index is None:
            try:
                index = self.folder.open(uuid, spec, verify=not checked)
            except KeyIndexUntrustedError as error:
                told = uuid in self._distrusted or target.base_snapshot is None
                if error.reason != "missing" or not told:
                    self._tell(error, table)
                self._distrusted.discard(uuid)
                index = self._rebuild(uuid, spec, target, table)
            self._keep(uuid, index)
        if index.snapshot == target.base_snapshot:
            return index
        return self._follow(uuid, index, target, table)

    def _follow(self, uuid: str, index: KeyIndex, target: DeltaTable, table: str) -> KeyIndex:
        """``index`` brought to the base snapshot: caught up, or rebuilt when it cannot be
        or when the commits since moved most of its rows."""
        plan = plan_catch_up(self.spark, target, index.snapshot, table)
        if plan.rebuild is None and _mostly_moved(plan, index):
            self._tell(_moved(index, plan), table)
        else:
            if plan.rebuild is None:
                try:
                    return self._catch_up(index, target, plan, table)
                except KeyIndexUntrustedError as error:
                    plan.rebuild = error.message
            reason = f"it cannot catch up: {plan.rebuild}"
            self._tell(untrusted(index.path, "behind", reason), table)
        spec = index.meta.key_spec
        self._forget(uuid)
        index = self._rebuild(uuid, spec, target, table)
        self._keep(uuid, index)
        return index

    def _catch_up(self, index: KeyIndex, target: DeltaTable, plan: CatchUp, table: str) -> KeyIndex:
        """Bring ``index`` to the base snapshot in one transaction (see ``catch_up``)."""
        index.begin()
        try:
            index.drop_files(sorted(plan.dropped))
            index.remove_at(plan.deleted)
            entries = read_entries(self.spark, target, plan.read, table, plan.optional)
            for data, keys, positions in entries:
                index.put(data, keys, positions)
            index.commit(target.base_snapshot)
        except BaseException:
            index.rollback()
            raise
        return index

    def _rebuild(self, uuid: str, spec: str, target: DeltaTable, table: str) -> KeyIndex:
        """A new index of the table at its base snapshot, read whole, renamed into place."""
        builder = self.folder.builder(uuid, spec)
        try:
            for data, keys, positions in read_entries(self.spark, target, None, table):
                builder.add(data, keys, positions)
            with spark_errors(f"rebuild the key index of {target.name}", table):
                builder.finish(target.base_snapshot)
        except BaseException:
            builder.abandon()
            raise
        return self.folder.install(builder)

    def _tell(self, error: KeyIndexUntrustedError, table: str) -> None:
        error.table = error.table or table
        self.notice(error)

    def _keep(self, uuid: str, index: KeyIndex) -> None:
        """Keep ``index`` open, closing the least recently used idle ones beyond the budget."""
        with self._guard:
            self.open.add(uuid, index, lambda other: self._locks[other].locked())

    def _forget(self, uuid: str) -> None:
        with self._guard:
            index = self.open.pop(uuid)
        if index is not None:
            index.close()

    def _lock(self, uuid: str) -> threading.Lock:
        with self._guard:
            lock = self._locks.get(uuid)
            if lock is None:
                lock = self._locks[uuid] = threading.Lock()
            return lock


def _mostly_moved(plan: CatchUp, index: KeyIndex) -> bool:
    """Whether the commits since the index's snapshot added at least ``REBUILD_MOVED_ROWS``
    rows and more than half the index's entries: a compaction of most of the table."""
    return plan.moved_rows >= REBUILD_MOVED_ROWS and plan.moved_rows * 2 > index.meta.entries


def _moved(index: KeyIndex, plan: CatchUp) -> KeyIndexUntrustedError:
    return KeyIndexUntrustedError(
        f"key index {index.path.name}: the commits since its snapshot moved {plan.moved_rows} "
        f"of its {index.meta.entries} rows (a compaction); it is rebuilt from the table, "
        "which costs less than catching up",
        file=str(index.path),
        reason="moved",
    )


def _uuid(target: DeltaTable, table: str) -> str:
    with spark_errors(f"read the UUID of {target.name}", table):
        return str(target.java.uuid())
