"""One commit of a keyed table's net change: a row delta where it serves, MERGE where not.

A row delta (``binlake.lake.write.row_delta``) costs what the batch changes; MERGE INTO reads the
table to find the rows it replaces, so its cost grows with the table. The row delta deletes the
rows it replaces by position, looked up in the table's key index (``key_positions``: the index
matched to the table's base snapshot, the batch staged and committed, then the index moved to
the new snapshot; crash points ``apply_before_delta_commit``, ``keyindex_after_delta_commit``),
or by key (``[applier] deletes = "equality"``: no ``positions``). MERGE stays where a row
delta cannot be exact, chosen per batch and recorded in the commit (``binlake.write``,
``binlake.write-reason``):

* some row lacks column values (``binlog_row_image`` MINIMAL or NOBLOB): only MERGE can keep
  the lake's value of a column the image left out (``_binlake_absent``);
* the table is partitioned (an equality delete is scoped to its partition, and the old row of
  a key may be in another), encrypted, of format version 1, or has a column type binlake does
  not write (``DeltaLayout.refusal``).

The MERGE:

```
MERGE INTO t USING changes s ON t.k = s.k
WHEN MATCHED AND s._binlake_op = 'D' THEN DELETE
WHEN MATCHED THEN UPDATE SET t.c = s.c, ...
WHEN NOT MATCHED AND s._binlake_op <> 'D' THEN INSERT (...) VALUES (...)
```
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping

from pyspark.sql import SparkSession
from pyspark.sql import types as st

from binlake.crashpoints import crash_point
from binlake.errors import KeyIndexDuplicateKeyError, KeyIndexUntrustedError
from binlake.lake.catalog.write_path import Write, WritePath
from binlake.lake.schema.sql import quote
from binlake.lake.spark.frames import dataframe_from_arrow
from binlake.lake.spark.types import spark_type
from binlake.lake.write.changes import ABSENT_MASK, OP, KeyedChanges
from binlake.lake.write.commit import execute_with_commit_properties
from binlake.lake.write.key_positions import KeyPositions
from binlake.lake.write.row_delta import DeltaTable, RowDeltaWriter
from binlake.typemap import LakeColumn, LakeSchema

ABSENT_REASON = "some row images lack columns (binlog_row_image MINIMAL or NOBLOB)"

_views = itertools.count(1)


class KeyedWriter:
    """Commits keyed tables' net changes for one Spark session (see the module docstring)."""

    def __init__(self, spark: SparkSession, positions: KeyPositions | None = None) -> None:
        self.spark = spark
        #: The key indexes position deletes come from; None: equality deletes.
        self.positions = positions
        self._local = threading.local()

    @property
    def deltas(self) -> RowDeltaWriter:
        """This thread's row-delta writer (a batch's tables commit on several threads)."""
        writer: RowDeltaWriter | None = getattr(self._local, "writer", None)
        if writer is None:
            writer = self._local.writer = RowDeltaWriter(self.spark)
        return writer

    def commit(
        self,
        name: str,
        schema: LakeSchema,
        changes: KeyedChanges,
        properties: Mapping[str, str],
        table: str,
    ) -> Write:
        """Commit ``changes`` to the Iceberg table ``name`` (replicating ``table``) in one
        snapshot carrying ``properties`` and the write it took; that write."""
        reason = ABSENT_REASON if changes.has_absent else None
        target = None
        if reason is None:
            target = self.deltas.open(name, schema.key, table)
            layout = target.layout
            reason = layout.refusal() if self.positions else layout.equality_refusal()
        if target is None or reason is not None:
            write = Write(WritePath.MERGE, reason)
            try:
                arrow = changes.to_arrow(schema.columns)
            finally:
                changes.close()
            frame_schema = _changes_schema(schema, arrow.num_columns)
            view = f"binlake_changes_{next(_views)}"
            dataframe_from_arrow(self.spark, arrow, frame_schema).createOrReplaceTempView(view)
            try:
                statement = merge_statement(name, view, schema, changes.has_absent)
                merged = {**properties, **write.properties()}
                execute_with_commit_properties(
                    self.spark, statement, merged, table, lake_table=name
                )
            finally:
                self.spark.catalog.dropTempView(view)
            return write
        write = Write(WritePath.ROW_DELTA)
        merged = {**properties, **write.properties()}
        try:
            if self.positions is not None:
                self._by_position(self.positions, target, schema, changes, merged, table)
                return write
            staged = self.deltas.stage(target, changes.delta_chunks(schema.columns), table)
        finally:
            changes.close()  # spilled files (a batch too big for memory) go
        crash_point("apply_before_delta_commit")
        self.deltas.commit(staged, merged, table)
        return write

    def _by_position(
        self,
        positions: KeyPositions,
        target: DeltaTable,
        schema: LakeSchema,
        changes: KeyedChanges,
        properties: Mapping[str, str],
        table: str,
    ) -> None:
        """The row delta with position deletes from the key index (``key_positions``); staged
        again, once each: on a rebuilt index when the index was found damaged mid-batch
        (removed first), and looking up every upserted key when one the batch took as new was
        in the index (``BatchPositions.look_up_new``: another writer's row, replaced)."""
        look_up_new = distrusted = False
        while True:
            batch = positions.begin(target, table, look_up_new=look_up_new)
            snapshot = None
            try:
                staged = self.deltas.stage(
                    target, changes.delta_chunks(schema.columns), table, positions=batch
                )
                crash_point("apply_before_delta_commit")
                committed = self.deltas.commit(staged, properties, table)
                crash_point("keyindex_after_delta_commit")
                # On top of another writer's commit that moved rows (Iceberg's retry), the index
                # stays at the base: the next batch catches it up over both commits.
                snapshot = positions.committed_at(target, committed, table)
            except KeyIndexDuplicateKeyError:
                positions.end(batch, None)
                if look_up_new:
                    raise
                look_up_new = True
                continue
            except KeyIndexUntrustedError as error:
                positions.end(batch, None)
                if distrusted:
                    raise
                distrusted = True
                positions.distrust(target, error, table)
                continue
            except BaseException:
                positions.end(batch, None)
                raise
            positions.end(batch, snapshot)
            return


def merge_statement(table: str, view: str, schema: LakeSchema, absent_mask: bool) -> str:
    """MERGE INTO ``table`` from the change view (module ``changes``): delete, update, insert."""
    on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in schema.key)
    sets = ", ".join(
        f"t.{quote(c.name)} = {_assigned(c, i, absent_mask)}" for i, c in enumerate(schema.columns)
    )
    names = ", ".join(quote(c.name) for c in schema.columns)
    values = ", ".join(f"s.{quote(c.name)}" for c in schema.columns)
    op = f"s.{quote(OP)}"
    return (
        f"MERGE INTO {table} t USING {view} s ON {on} "
        f"WHEN MATCHED AND {op} = 'D' THEN DELETE "
        f"WHEN MATCHED THEN UPDATE SET {sets} "
        f"WHEN NOT MATCHED AND {op} <> 'D' THEN INSERT ({names}) VALUES ({values})"
    )


def _assigned(column: LakeColumn, index: int, absent_mask: bool) -> str:
    value = f"s.{quote(column.name)}"
    if not absent_mask:
        return value
    keep = f"substring(s.{quote(ABSENT_MASK)}, {index + 1}, 1) = '1'"
    return f"CASE WHEN {keep} THEN t.{quote(column.name)} ELSE {value} END"


def _changes_schema(schema: LakeSchema, width: int) -> st.StructType:
    """The change view's Spark schema: every data column nullable (deletes carry only keys)."""
    fields = [st.StructField(c.name, spark_type(c), True) for c in schema.columns]
    fields.append(st.StructField(OP, st.StringType(), False))
    if width > len(fields):
        fields.append(st.StructField(ABSENT_MASK, st.StringType(), False))
    return st.StructType(fields)
