"""The net change of one batch to one table, as an Arrow table for one MERGE or one append.

Pure (pyarrow only, no Spark): rows go in as ``types.RowConverter`` made them (one value per
source column, in TABLE_MAP order; ``ABSENT`` where a MINIMAL/NOBLOB image left a column out),
and come out as an Arrow table whose columns are the lake table's, by name.

Tables with a key (``KeyedChanges``): the net change per key, in source order:

==============================  =========================================================
sequence in the batch           net change
==============================  =========================================================
insert                          upsert (the row)
update (same key)               upsert (the after image; columns it lacks taken from the
                                before image or an earlier image in the batch, else kept
                                from the lake: the ``_binlake_absent`` mask)
update changing the key         delete of the old key + upsert of the new key
delete                          delete
insert ... delete               nothing (the key did not exist before the batch; a delete
                                unless ``lake_exact``)
delete ... insert               upsert
several updates                 one upsert with the last values
==============================  =========================================================

One row per key comes out: ``_binlake_op`` is ``U`` (upsert) or ``D`` (delete; only the key
columns are set), so ``MERGE INTO t USING changes ON key WHEN MATCHED AND op = 'D' THEN DELETE
WHEN MATCHED THEN UPDATE ... WHEN NOT MATCHED AND op <> 'D' THEN INSERT ...`` applies it. For a
row delta (``delta``): the upserted rows, and the keys whose older rows must go (every delete,
and every upsert of a key the lake may hold).

Whether the lake may hold a key is what ``lake_exact`` says. True only when the lake table equals
the source at its applied position (``binlake.lake.tables.lake``: streamed from its start, or past
its copy's consistent position) and its key is the source's primary key: then a key whose first
change in the batch is an insert cannot be in the lake (the source refused a duplicate, and every
earlier change reached the lake), so "insert ... delete" is nothing and an insert needs no
delete. False (a copy still catching up re-applies inserts of rows a later chunk may already
hold; a key the source does not enforce), every key is treated as one the lake may hold:
"insert ... delete" is a delete, and every upsert deletes the key's older row.

An insert (or a key change) whose image lacks a column cannot be applied exactly: the value is
nowhere else (``RowImageError``; binlog_row_image=MINIMAL leaves out the columns an INSERT did
not name).

Tables without a key (``ChangeLog``): every row image is appended as a change-log row:
``_binlake_op`` ``insert`` / ``update_before`` / ``update_after`` / ``delete``,
``_binlake_position`` (the transaction's source position) and ``_binlake_seq`` (the row's order
within the transaction), as ``binlake.lake.schema.evolution.changelog_schema`` declares them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from operator import itemgetter
from typing import Any, cast

import pyarrow as pa

from binlake.binlog.rows import RowChange
from binlake.binlog.values import ABSENT
from binlake.errors import ApplyError, RowImageError
from binlake.lake.write import spill
from binlake.lake.write.spill import Entry, KeySpill
from binlake.typemap import LakeColumn

OP = "_binlake_op"
ABSENT_MASK = "_binlake_absent"
CHANGELOG_POSITION = "_binlake_position"
CHANGELOG_SEQ = "_binlake_seq"
RESERVED = frozenset({OP, ABSENT_MASK, CHANGELOG_POSITION, CHANGELOG_SEQ})

Row = tuple[Any, ...]


class Op(StrEnum):
    UPSERT = "U"
    DELETE = "D"


@dataclass(slots=True)
class _Net:
    op: Op
    #: The row (upserts; ``ABSENT`` where the lake keeps its value); None for deletes.
    row: Row | None
    #: The key was in the table before the batch (its first change here was not an insert).
    existed: bool


class KeyedChanges:
    """The net change per key of one table in one batch (see the module docstring).

    ``names`` are the source columns in row order; ``key`` the key column names; ``table`` the
    source ``db.table`` (for messages)."""

    def __init__(
        self,
        table: str,
        names: Sequence[str],
        key: Sequence[str],
        *,
        lake_exact: bool = False,
        max_entries: int | None = None,
    ) -> None:
        if not key:
            raise ValueError(f"{table}: a keyed change set needs key columns")
        position = {name.casefold(): i for i, name in enumerate(names)}
        reserved = [n for n in names if n.casefold() in RESERVED]
        if reserved:
            raise RowImageError(
                f"table {table}: column {reserved[0]} has a name binlake reserves",
                table=table,
                hint="rename the column in the source, or exclude the table in [tables]",
            )
        self.table = table
        self.names = tuple(names)
        self.key_index = tuple(position[name.casefold()] for name in key)
        #: The key's values of a row, as a tuple (the hot path of every row change).
        self._key_of: Callable[[Row], Row] = _tuple_getter(self.key_index)
        #: A key first seen inserted is absent from the lake (see the module docstring).
        self.lake_exact = lake_exact
        self._net: dict[Row, _Net] = {}
        #: Row changes taken in (not net): for metrics.
        self.changes = 0
        #: Whether some row lacks a value (``has_absent``); None: not known, to be looked at.
        self._absent: bool | None = False
        #: Entries beyond ``max_entries`` go to disk in runs (``binlake.lake.write.spill``).
        self.max_entries = max_entries if max_entries is not None else spill.MAX_ENTRIES
        self._spill: KeySpill | None = None

    def __len__(self) -> int:
        """Net entries (an upper bound once some were spilled: composing may drop some)."""
        return len(self._net) + (self._spill.entries if self._spill is not None else 0)

    @property
    def spilled(self) -> bool:
        return self._spill is not None

    def net(self) -> list[tuple[Op, Row | None, Row]]:
        """(op, row or None, key) per key (in order of the keys' first change, unless some
        were spilled: then by bucket)."""
        return [(Op(op), row, key) for chunk in self._entries() for key, op, row, _existed in chunk]

    def close(self) -> None:
        """Remove spilled files (the change set is done with)."""
        if self._spill is not None:
            self._spill.close()
            self._spill = None

    def _entries(self) -> Iterator[list[Entry]]:
        """The net entries in chunks: the dict's, or (once something was spilled) the dict's
        spilled too and every bucket composed (``KeySpill.composed``)."""
        if self._spill is None:
            yield [(key, e.op.value, e.row, e.existed) for key, e in self._net.items()]
            return
        if self._net:
            self._spill_run()
        yield from self._spill.composed()

    def _spill_run(self) -> None:
        if self._spill is None:
            self._spill = KeySpill(self.table)
        self._spill.add((key, e.op.value, e.row, e.existed) for key, e in self._net.items())
        self._net.clear()
        self._absent = None

    # ---- taking changes in ----------------------------------------------------------------

    def take(self, kind: str, changes: Sequence[RowChange], *, whole: bool) -> None:
        """Every (before, after) row change of one rows event of ``kind`` (write, update,
        delete), in order. ``whole``: every image holds every column (the event's column
        bitmaps are full), so no value is ``ABSENT``: nothing to fill from another image, and
        nothing to check."""
        for before, after in changes:
            if kind == "write" and after is not None:
                self.insert(after, whole=whole)
            elif kind == "update" and before is not None and after is not None:
                self.update(before, after, whole=whole)
            elif before is not None:
                self.delete(before)

    def insert(self, after: Row, *, whole: bool = False) -> None:
        """An inserted row (``whole``: it holds every column, see ``take``)."""
        self.changes += 1
        key = self._key(after)
        previous = self._net.get(key)
        row = after
        if not whole:
            row = _filled(after, previous.row if previous else None)
            self._require_whole(row, "an inserted row")
        existed = previous.existed if previous else not self.lake_exact
        self._upsert(key, row, existed=existed, whole=whole)

    def update(self, before: Row, after: Row, *, whole: bool = False) -> None:
        """An updated row's two images (``whole``: both hold every column, see ``take``)."""
        self.changes += 1
        old_key = self._key(before)
        previous = self._net.get(old_key)
        row = after
        if not whole:
            # A column the after image lacks kept its value: the before image has it, or an
            # earlier image of the batch, or else only the lake (the absent mask).
            row = _filled(_filled(after, before), previous.row if previous else None)
        new_key = self._key(row)
        if new_key == old_key:
            existed = previous.existed if previous else True
            self._upsert(new_key, row, existed=existed, whole=whole)
            return
        if not whole:
            self._require_whole(row, "a row whose key changed")
        self._delete(old_key)
        moved_to = self._net.get(new_key)
        existed = moved_to.existed if moved_to else not self.lake_exact
        self._upsert(new_key, row, existed=existed, whole=whole)

    def delete(self, before: Row) -> None:
        self.changes += 1
        self._delete(self._key(before))

    def _key(self, row: Row) -> Row:
        key = self._key_of(row)
        if ABSENT in key or None in key:  # `in`: identity first, and ABSENT equals only itself
            raise RowImageError(
                f"table {self.table}: a row image lacks its key "
                f"({', '.join(self.names[i] for i in self.key_index)})",
                table=self.table,
            )
        return key

    def _upsert(self, key: Row, row: Row, *, existed: bool, whole: bool = False) -> None:
        self._net[key] = _Net(Op.UPSERT, row, existed)
        if not whole or self._absent:  # a whole row lacks nothing: none known stays none
            self._absent = None
        if len(self._net) > self.max_entries:
            self._spill_run()

    def _delete(self, key: Row) -> None:
        if self._absent:  # a delete takes a row away, it never brings one that lacks values
            self._absent = None
        previous = self._net.get(key)
        if previous is not None and not previous.existed:
            del self._net[key]  # inserted in this batch: nothing reaches the lake
        else:
            self._net[key] = _Net(Op.DELETE, None, True)
            if len(self._net) > self.max_entries:
                self._spill_run()

    def _require_whole(self, row: Row, what: str) -> None:
        if ABSENT not in row:  # the usual case, in C (see ``_key``)
            return
        missing = [self.names[i] for i, value in enumerate(row) if value is ABSENT]
        if missing:
            raise RowImageError(
                f"table {self.table}: {what} lacks column(s) {', '.join(missing)} and their "
                "values are nowhere else (binlog_row_image=MINIMAL?)",
                table=self.table,
            )

    # ---- the Arrow table ------------------------------------------------------------------

    @property
    def has_absent(self) -> bool:
        """Some net row lacks a column value (known once per state of the change set; once
        some entries were spilled, some spilled row lacked one: the later images of its key
        may have filled it, and MERGE is then taken where a row delta would have done)."""
        if self._absent is None:
            spilled = self._spill is not None and self._spill.absent
            self._absent = spilled or any(
                e.row is not None and _lacks(e.row) for e in self._net.values()
            )
        return self._absent

    def to_arrow(self, columns: Sequence[LakeColumn]) -> pa.Table:
        """The net change as an Arrow table: ``columns`` (the lake table's, matched to the
        source columns by name), then ``_binlake_op``, then ``_binlake_absent`` (one '1'/'0'
        per column of ``columns``: '1' = keep the lake's value) when some row lacks a value."""
        source = {name.casefold(): i for i, name in enumerate(self.names)}
        where = [source[c.name.casefold()] for c in columns]
        has_absent = self.has_absent
        values: list[list[Any]] = [[] for _ in columns]
        ops: list[str] = []
        masks: list[str | None] = []
        for chunk in self._entries():
            for key, op, entry_row, _existed in chunk:
                ops.append(op)
                row = entry_row if entry_row is not None else self._key_only(key)
                for out, index in zip(values, where, strict=True):
                    value = row[index]
                    out.append(None if value is ABSENT else value)
                masks.append("".join("1" if row[i] is ABSENT else "0" for i in where))
        arrays = [column_array(v, c, self.table) for v, c in zip(values, columns, strict=True)]
        fields = [pa.field(c.name, c.arrow_type()) for c in columns]
        arrays.append(pa.array(ops, pa.string()))
        fields.append(pa.field(OP, pa.string(), nullable=False))
        if has_absent:
            arrays.append(pa.array(masks, pa.string()))
            fields.append(pa.field(ABSENT_MASK, pa.string(), nullable=False))
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields))

    def delta(self, columns: Sequence[LakeColumn]) -> tuple[pa.Table, pa.Table]:
        """The net change as a row delta: (every upserted row with ``columns``, the key columns
        of every key whose older row must go: deletes, and upserts of keys the lake may hold).
        Refused when a row lacks a value (``has_absent``: only MERGE can keep the lake's)."""
        chunks = list(self.delta_chunks(columns))
        if not chunks:
            rows, keys = self._delta_arrays([], [], columns)
            return rows, keys
        return (
            pa.concat_tables([rows for rows, _ in chunks]),
            pa.concat_tables([keys for _, keys in chunks]),
        )

    def delta_chunks(self, columns: Sequence[LakeColumn]) -> Iterator[tuple[pa.Table, pa.Table]]:
        """``delta`` in chunks (one per spilled bucket, or one): memory holds one at a time.
        Each key is in one chunk only."""
        if self.has_absent:
            raise ValueError(f"{self.table}: a row lacks column values; a row delta cannot")
        if self._spill is None:  # the dict's entries as they are
            net = self._net
            upserted = [e.row for e in net.values() if e.row is not None]
            gone = [key for key, e in net.items() if e.existed]
            yield self._delta_arrays(upserted, gone, columns)
            return
        for chunk in self._entries():
            yield self._delta_arrays(
                [row for _key, _op, row, _existed in chunk if row is not None],
                [key for key, _op, _row, existed in chunk if existed],
                columns,
            )

    def _delta_arrays(
        self, upserted: list[Row], gone: list[Row], columns: Sequence[LakeColumn]
    ) -> tuple[pa.Table, pa.Table]:
        """The rows ``upserted`` with ``columns``, and the keys ``gone`` with the key columns:
        each turned into columns at once (``zip(*rows)``)."""
        source = {name.casefold(): i for i, name in enumerate(self.names)}
        where = [source[c.name.casefold()] for c in columns]
        key_columns = [c for c in columns if source[c.name.casefold()] in self.key_index]
        key_columns.sort(key=lambda c: self.key_index.index(source[c.name.casefold()]))
        by_source = _transposed(upserted, len(self.names))
        rows = [by_source[index] for index in where]
        keys = _transposed(gone, len(self.key_index))
        return _arrow(rows, columns, self.table), _arrow(keys, key_columns, self.table)

    def _key_only(self, key: Row) -> Row:
        row: list[Any] = [None] * len(self.names)
        for index, value in zip(self.key_index, key, strict=True):
            row[index] = value
        return tuple(row)


class ChangeLog:
    """Row images of one table without a key, appended as change-log rows in source order."""

    def __init__(self, table: str, names: Sequence[str]) -> None:
        self.table = table
        self.names = tuple(names)
        self._rows: list[tuple[str, Row, str, int]] = []
        self._seq: dict[str, int] = {}
        self.changes = 0

    def __len__(self) -> int:
        return len(self._rows)

    def insert(self, after: Row, position: str) -> None:
        self.changes += 1
        self._add("insert", after, position)

    def update(self, before: Row, after: Row, position: str) -> None:
        self.changes += 1
        self._add("update_before", before, position)
        self._add("update_after", after, position)

    def delete(self, before: Row, position: str) -> None:
        self.changes += 1
        self._add("delete", before, position)

    def _add(self, op: str, row: Row, position: str) -> None:
        missing = [self.names[i] for i, value in enumerate(row) if value is ABSENT]
        if missing:
            raise RowImageError(
                f"table {self.table} is replicated as a change log, which needs whole row "
                f"images; one lacks column(s) {', '.join(missing)}",
                table=self.table,
            )
        seq = self._seq.get(position, 0)
        self._seq[position] = seq + 1
        self._rows.append((op, row, position, seq))

    def to_arrow(self, columns: Sequence[LakeColumn]) -> pa.Table:
        """The change-log rows with ``columns`` (the lake table's: the source columns by name
        and the three ``_binlake_*`` columns)."""
        source = {name.casefold(): i for i, name in enumerate(self.names)}
        out: list[pa.Array] = []
        for column in columns:
            name = column.name
            if name == OP:
                values: list[Any] = [op for op, _, _, _ in self._rows]
            elif name == CHANGELOG_POSITION:
                values = [position for _, _, position, _ in self._rows]
            elif name == CHANGELOG_SEQ:
                values = [seq for _, _, _, seq in self._rows]
            else:
                index = source[name.casefold()]
                values = [row[index] for _, row, _, _ in self._rows]
            out.append(column_array(values, column, self.table))
        fields = [pa.field(c.name, c.arrow_type(), nullable=c.nullable) for c in columns]
        return pa.Table.from_arrays(out, schema=pa.schema(fields))


def _filled(row: Row, other: Row | None) -> Row:
    """``row`` with its ``ABSENT`` values taken from ``other`` where it has them."""
    if other is None or not _lacks(row):
        return row
    return tuple(o if v is ABSENT else v for v, o in zip(row, other, strict=True))


def _lacks(row: Row) -> bool:
    return ABSENT in row  # identity first, and ABSENT equals only itself


def _tuple_getter(indexes: tuple[int, ...]) -> Callable[[Row], Row]:
    """A function giving a row's values at ``indexes`` as a tuple (``itemgetter``'s speed;
    it gives a bare value for one index)."""
    if len(indexes) == 1:
        (index,) = indexes
        return lambda row: (row[index],)
    return cast(Callable[[Row], Row], itemgetter(*indexes))


def _transposed(rows: list[Row], width: int) -> list[Sequence[Any]]:
    """The columns of ``rows`` (each ``width`` values long)."""
    if not rows:
        return [() for _ in range(width)]
    return list(zip(*rows, strict=True))


def _arrow(values: Sequence[Sequence[Any]], columns: Sequence[LakeColumn], table: str) -> pa.Table:
    arrays = [column_array(v, c, table) for v, c in zip(values, columns, strict=True)]
    fields = [pa.field(c.name, c.arrow_type()) for c in columns]
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def column_array(values: Sequence[Any], column: LakeColumn, table: str) -> pa.Array:
    """``values`` as an Arrow array of ``column``'s type; a value that does not fit is an
    ``ApplyError`` naming the table and column."""
    try:
        return pa.array(values, column.arrow_type())
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as error:
        raise misfit_error(table, column.name, column.iceberg_type, error) from None


def misfit_error(table: str, column: str, type_name: object, error: Exception) -> ApplyError:
    """The error for a value that does not fit an Iceberg column."""
    return ApplyError(
        f"table {table}: a value does not fit column {column} ({type_name}) of the Iceberg "
        f"table: {error}",
        table=table,
        hint="the Iceberg table's type is narrower than the source's; re-snapshot the table "
        "or exclude it in [tables]",
    )
