"""The net change per key of one batch, and change-log rows: the rules, and the Arrow tables they
become (types from the design's mapping)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from binlake.binlog.values import ABSENT
from binlake.errors import ApplyError, RowImageError
from binlake.lake.write.changes import ABSENT_MASK, OP, ChangeLog, KeyedChanges, Op
from binlake.typemap import IcebergType, LakeColumn, lake_schema
from lake_tables import LAKE_ROWS, NAMES, every_type_table_map

NAMES_3 = ("id", "name", "qty")
COLUMNS_3 = (
    LakeColumn("id", 0, "INT", IcebergType.INT, nullable=False),
    LakeColumn("name", 1, "VARCHAR", IcebergType.STRING),
    LakeColumn("qty", 2, "BIGINT", IcebergType.LONG),
)


def keyed(*, lake_exact: bool = True) -> KeyedChanges:
    """Changes of a table the lake holds exactly as the source did before the batch (the
    rules of the table below), unless ``lake_exact`` is false."""
    return KeyedChanges("shop.items", NAMES_3, ("id",), lake_exact=lake_exact)


def net(changes: KeyedChanges) -> list[tuple[str, tuple[object, ...] | None]]:
    return [(op.value, row) for op, row, _key in changes.net()]


def test_an_insert_is_an_upsert_of_the_row() -> None:
    changes = keyed()
    changes.insert((1, "a", 5))
    assert net(changes) == [("U", (1, "a", 5))]


def test_several_updates_of_one_key_become_one_upsert_with_the_last_values() -> None:
    changes = keyed()
    changes.update((1, "a", 5), (1, "b", 6))
    changes.update((1, "b", 6), (1, "c", 7))
    assert net(changes) == [("U", (1, "c", 7))]
    assert changes.changes == 2


def test_a_delete_is_a_delete_of_the_key() -> None:
    changes = keyed()
    changes.delete((1, "a", 5))
    assert net(changes) == [("D", None)]


def test_an_insert_then_a_delete_in_one_batch_is_nothing() -> None:
    changes = keyed()
    changes.insert((1, "a", 5))
    changes.update((1, "a", 5), (1, "b", 5))
    changes.delete((1, "b", 5))
    assert net(changes) == []
    assert len(changes) == 0


def test_a_delete_then_an_insert_of_the_same_key_is_an_upsert() -> None:
    changes = keyed()
    changes.delete((1, "a", 5))
    changes.insert((1, "new", 1))
    assert net(changes) == [("U", (1, "new", 1))]


def test_a_delete_after_delete_then_insert_is_still_a_delete() -> None:
    """The key existed before the batch: deleting the re-inserted row must reach the lake."""
    changes = keyed()
    changes.delete((1, "a", 5))
    changes.insert((1, "new", 1))
    changes.delete((1, "new", 1))
    assert net(changes) == [("D", None)]


def test_an_update_that_changes_the_key_deletes_the_old_key_and_upserts_the_new() -> None:
    changes = keyed()
    changes.update((1, "a", 5), (2, "a", 5))
    assert [(op, key) for op, _row, key in changes.net()] == [(Op.DELETE, (1,)), (Op.UPSERT, (2,))]


def test_a_key_change_of_a_row_inserted_in_the_batch_leaves_only_the_new_key() -> None:
    changes = keyed()
    changes.insert((1, "a", 5))
    changes.update((1, "a", 5), (2, "a", 6))
    assert net(changes) == [("U", (2, "a", 6))]


def test_keys_swapped_through_a_third_key_end_as_two_upserts() -> None:
    changes = keyed()
    changes.update((1, "one", 1), (3, "one", 1))
    changes.update((2, "two", 2), (1, "two", 2))
    changes.update((3, "one", 1), (2, "one", 1))
    assert sorted((key, op.value, row) for op, row, key in changes.net()) == [
        ((1,), "U", (1, "two", 2)),
        ((2,), "U", (2, "one", 1)),
    ]


def test_while_the_lake_may_hold_a_key_an_insert_then_a_delete_is_a_delete() -> None:
    """A copy catching up may hold a row inserted after its first chunk: the delete that
    follows the re-applied insert must reach the lake."""
    changes = keyed(lake_exact=False)
    changes.insert((1, "a", 5))
    changes.delete((1, "a", 5))
    assert net(changes) == [("D", None)]


def test_while_the_lake_may_hold_a_key_a_swap_through_a_third_key_deletes_it() -> None:
    changes = keyed(lake_exact=False)
    changes.update((1, "one", 1), (3, "one", 1))
    changes.update((2, "two", 2), (1, "two", 2))
    changes.update((3, "one", 1), (2, "one", 1))
    assert sorted((key, op.value) for op, _row, key in changes.net()) == [
        ((1,), "U"),
        ((2,), "U"),
        ((3,), "D"),
    ]


def delta_keys(changes: KeyedChanges) -> list[int]:
    return sorted(changes.delta(COLUMNS_3)[1].column("id").to_pylist())


def test_a_row_delta_deletes_every_deleted_and_updated_key_but_no_fresh_insert() -> None:
    changes = keyed()
    changes.insert((1, "new", 1))  # fresh: the lake cannot hold key 1
    changes.update((2, "b", 2), (2, "b2", 2))  # the lake holds 2: its old row goes
    changes.delete((3, "c", 3))
    changes.delete((4, "d", 4))
    changes.insert((4, "d again", 4))  # deleted then inserted: the old row goes
    changes.insert((5, "e", 5))
    changes.update((5, "e", 5), (5, "e2", 5))  # inserted then updated: still fresh
    changes.update((6, "f", 6), (7, "f", 6))  # a key change: 6 goes, 7 is fresh
    rows, keys = changes.delta(COLUMNS_3)
    assert sorted(rows.to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "name": "new", "qty": 1},
        {"id": 2, "name": "b2", "qty": 2},
        {"id": 4, "name": "d again", "qty": 4},
        {"id": 5, "name": "e2", "qty": 5},
        {"id": 7, "name": "f", "qty": 6},
    ]
    assert sorted(keys.column("id").to_pylist()) == [2, 3, 4, 6]
    assert keys.column_names == ["id"]


def test_a_row_delta_deletes_every_key_while_the_lake_may_hold_it() -> None:
    changes = keyed(lake_exact=False)
    changes.insert((1, "new", 1))
    changes.insert((5, "e", 5))
    changes.update((5, "e", 5), (5, "e2", 5))
    changes.update((6, "f", 6), (7, "f", 6))
    assert delta_keys(changes) == [1, 5, 6, 7]


def test_a_row_delta_keys_come_in_key_order_whatever_the_column_order() -> None:
    columns = (
        LakeColumn("a", 0, "INT", IcebergType.INT, nullable=False),
        LakeColumn("v", 1, "INT", IcebergType.INT),
        LakeColumn("b", 2, "VARCHAR", IcebergType.STRING, nullable=False),
    )
    changes = KeyedChanges("shop.pair", ("a", "v", "b"), ("b", "a"))
    changes.delete((1, 2, "x"))
    keys = changes.delta(columns)[1]
    assert keys.column_names == ["b", "a"]
    assert keys.to_pylist() == [{"b": "x", "a": 1}]


def test_a_row_delta_refuses_rows_that_lack_values() -> None:
    changes = keyed()
    changes.update((1, ABSENT, ABSENT), (ABSENT, ABSENT, 6))
    with pytest.raises(ValueError, match="lacks column values"):
        changes.delta(COLUMNS_3)


def test_a_column_the_after_image_lacks_comes_from_the_before_image() -> None:
    changes = keyed()
    changes.update((1, "a", 5), (1, ABSENT, 6))
    assert net(changes) == [("U", (1, "a", 6))]


def test_a_column_no_image_has_is_kept_from_the_lake_by_the_absent_mask() -> None:
    """binlog_row_image=MINIMAL: the before image has the key only."""
    changes = keyed()
    changes.update((1, ABSENT, ABSENT), (ABSENT, ABSENT, 6))
    assert net(changes) == [("U", (1, ABSENT, 6))]
    table = changes.to_arrow(COLUMNS_3)
    assert table.column(ABSENT_MASK).to_pylist() == ["010"]
    assert table.column("name").to_pylist() == [None]


def test_a_later_image_fills_what_an_earlier_one_lacked_within_the_batch() -> None:
    changes = keyed()
    changes.insert((1, "a", 5))
    changes.update((1, ABSENT, ABSENT), (ABSENT, ABSENT, 6))
    assert net(changes) == [("U", (1, "a", 6))]
    assert not changes.has_absent


def test_an_insert_lacking_a_column_is_refused_with_the_row_image_error() -> None:
    changes = keyed()
    with pytest.raises(RowImageError, match="qty") as caught:
        changes.insert((1, "a", ABSENT))
    assert caught.value.setting == "binlog_row_image"
    assert caught.value.table == "shop.items"


def test_a_key_change_lacking_a_column_is_refused() -> None:
    changes = keyed()
    with pytest.raises(RowImageError, match="key changed"):
        changes.update((1, ABSENT, ABSENT), (2, ABSENT, 6))


def test_a_row_without_its_key_is_refused() -> None:
    with pytest.raises(RowImageError, match="lacks its key"):
        keyed().delete((ABSENT, "a", 5))


def test_a_column_named_like_binlake_s_own_is_refused() -> None:
    with pytest.raises(RowImageError, match="reserves"):
        KeyedChanges("shop.items", ("id", "_binlake_op"), ("id",))


def test_the_arrow_table_has_the_lake_columns_by_name_then_the_op() -> None:
    changes = keyed()
    changes.insert((1, "a", 5))
    changes.delete((2, "b", 6))
    lake_order = (COLUMNS_3[2], COLUMNS_3[0], COLUMNS_3[1])  # Iceberg adds columns at the end
    table = changes.to_arrow(lake_order)
    assert table.schema.names == ["qty", "id", "name", OP]
    assert table.to_pylist() == [
        {"qty": 5, "id": 1, "name": "a", OP: "U"},
        {"qty": None, "id": 2, "name": None, OP: "D"},
    ]
    assert table.schema.field("qty").type == pa.int64()


def test_every_mapped_type_becomes_its_arrow_type_with_exact_values() -> None:
    tm = every_type_table_map()
    schema = lake_schema(tm, {len(NAMES) - 1: "uuid"})
    changes = KeyedChanges("shop.every_type", NAMES, schema.key)
    for row in LAKE_ROWS:
        changes.insert(row)
    table = changes.to_arrow(schema.columns)
    for column in schema.columns:
        assert table.schema.field(column.name).type == column.arrow_type(), column.name
    got = table.to_pylist()
    for row, want in zip(got, LAKE_ROWS, strict=True):
        for name, value in zip(NAMES, want, strict=True):
            assert row[name] == value, name
    assert got[1]["biu"] == Decimal(2**64 - 1)
    assert got[0]["dt"] == dt.date(1, 1, 1)


def test_a_value_that_does_not_fit_the_lake_column_is_a_typed_error() -> None:
    changes = keyed()
    changes.insert((1, "a", 2**70))
    with pytest.raises(ApplyError, match="does not fit column qty") as caught:
        changes.to_arrow(COLUMNS_3)
    assert caught.value.table == "shop.items"


# ---- change logs --------------------------------------------------------------------------------

LOG_COLUMNS = (
    LakeColumn("id", 0, "INT", IcebergType.INT, nullable=False),
    LakeColumn("name", 1, "VARCHAR", IcebergType.STRING),
    LakeColumn("qty", 2, "BIGINT", IcebergType.LONG),
    LakeColumn("_binlake_op", 3, "", IcebergType.STRING, nullable=False),
    LakeColumn("_binlake_position", 4, "", IcebergType.STRING, nullable=False),
    LakeColumn("_binlake_seq", 5, "", IcebergType.LONG, nullable=False),
)


def test_a_change_log_keeps_every_image_in_order_with_position_and_sequence() -> None:
    log = ChangeLog("shop.audit", NAMES_3)
    log.insert((1, "a", 5), "bin.000001:100")
    log.update((1, "a", 5), (1, "b", 5), "bin.000001:200")
    log.delete((1, "b", 5), "bin.000001:200")
    rows = log.to_arrow(LOG_COLUMNS).to_pylist()
    assert [
        (r["_binlake_op"], r["name"], r["_binlake_position"], r["_binlake_seq"]) for r in rows
    ] == [
        ("insert", "a", "bin.000001:100", 0),
        ("update_before", "a", "bin.000001:200", 0),
        ("update_after", "b", "bin.000001:200", 1),
        ("delete", "b", "bin.000001:200", 2),
    ]
    assert len(log) == 4 and log.changes == 3


def test_a_change_log_refuses_partial_images() -> None:
    log = ChangeLog("shop.audit", NAMES_3)
    with pytest.raises(RowImageError, match="whole row images"):
        log.update((1, "a", ABSENT), (1, "b", ABSENT), "bin.000001:200")
