"""A batch's net change per key is the same whether it fits in memory or was spilled to disk in
runs (``binlake.lake.write.spill``) and composed again, and whether its rows were taken one by
one or a rows event at a time (``KeyedChanges.take``, whole images or not): for any sequence of
inserts, updates (some moving the key, some with MINIMAL images) and deletes that a table could
have seen."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from binlake.binlog.values import ABSENT
from binlake.lake.write.changes import KeyedChanges
from binlake.lake.write.spill import compose
from binlake.typemap import IcebergType, LakeColumn

NAMES = ("id", "v", "n")
COLUMNS = (
    LakeColumn("id", 0, "INT", IcebergType.INT, nullable=False),
    LakeColumn("v", 1, "VARCHAR", IcebergType.STRING),
    LakeColumn("n", 2, "INT", IcebergType.INT),
)


@st.composite
def histories(draw: Any) -> list[tuple[str, tuple[Any, ...], tuple[Any, ...] | None]]:
    """Changes a source table could log: keys 0..7, present or not, images full or MINIMAL."""
    present: dict[int, tuple[Any, ...]] = {
        k: (k, f"old{k}", k) for k in draw(st.sets(st.integers(0, 7)))
    }
    out: list[tuple[str, tuple[Any, ...], tuple[Any, ...] | None]] = []
    for step in range(draw(st.integers(0, 40))):
        key = draw(st.integers(0, 7))
        if key not in present:
            row = (key, f"i{step}", step)
            present[key] = row
            out.append(("insert", row, None))
            continue
        before = present[key]
        kind = draw(st.sampled_from(["update", "move", "minimal", "delete"]))
        if kind == "delete":
            del present[key]
            out.append(("delete", before, None))
        elif kind == "move":
            target = draw(st.integers(0, 7))
            if target in present:
                continue
            after = (target, before[1], step)
            del present[key]
            present[target] = after
            out.append(("update", before, after))
        elif kind == "minimal":
            present[key] = (key, before[1], step)
            out.append(("update", (key, ABSENT, ABSENT), (ABSENT, ABSENT, step)))
        else:
            after = (key, f"u{step}", before[2])
            present[key] = after
            out.append(("update", before, after))
    return out


EVENT_KINDS = {"insert": "write", "update": "update", "delete": "delete"}


def take_rows(changes: KeyedChanges, history: list[Any]) -> None:
    for kind, first, second in history:
        if kind == "insert":
            changes.insert(first)
        elif kind == "update":
            changes.update(first, second)
        else:
            changes.delete(first)


def take_events(changes: KeyedChanges, history: list[Any], said_whole: list[bool]) -> None:
    """``history`` as rows events (runs of one kind), each taken whole when no image lacks a
    value and ``said_whole`` says so (else by the path for partial images)."""
    at = 0
    while at < len(history):
        kind = history[at][0]
        end = at
        while end < len(history) and history[end][0] == kind:
            end += 1
        pairs = [
            (None, first) if kind == "insert" else (first, second)
            for _, first, second in history[at:end]
        ]
        lacks = any(ABSENT in image for pair in pairs for image in pair if image is not None)
        whole = not lacks and said_whole[at % len(said_whole)]
        changes.take(EVENT_KINDS[kind], pairs, whole=whole)
        at = end


def net(
    history: list[Any], *, max_entries: int, lake_exact: bool, said_whole: list[bool] | None = None
) -> dict[Any, Any]:
    changes = KeyedChanges("db.t", NAMES, ("id",), lake_exact=lake_exact, max_entries=max_entries)
    if said_whole is None:
        take_rows(changes, history)
    else:
        take_events(changes, history, said_whole)
    rows: list[Any] | None = None
    try:
        entries = {key: (op.value, row) for op, row, key in changes.net()}
        absent = changes.has_absent
        upserted, deleted = changes.delta(COLUMNS)
        keys = {k["id"] for k in deleted.to_pylist()}
        rows = upserted.to_pylist()
    except ValueError:  # a row lacks values: MERGE's case, no row delta
        keys = None
    finally:
        changes.close()
    return {"entries": entries, "deleted": keys, "absent": absent, "rows": rows}


@settings(max_examples=300, deadline=None)
@given(histories(), st.integers(1, 4), st.booleans())
def test_spilled_runs_compose_to_the_net_change_memory_gives(
    history: list[Any], max_entries: int, lake_exact: bool
) -> None:
    whole = net(history, max_entries=10_000, lake_exact=lake_exact)
    spilled = net(history, max_entries=max_entries, lake_exact=lake_exact)
    assert spilled["entries"] == whole["entries"]
    if whole["deleted"] is not None and spilled["deleted"] is not None:
        assert spilled["deleted"] == whole["deleted"]


@settings(max_examples=300, deadline=None)
@given(histories(), st.integers(1, 10_000), st.booleans(), st.lists(st.booleans(), min_size=1))
def test_rows_events_taken_whole_give_the_net_change_of_their_rows_one_by_one(
    history: list[Any], max_entries: int, lake_exact: bool, said_whole: list[bool]
) -> None:
    by_row = net(history, max_entries=max_entries, lake_exact=lake_exact)
    by_event = net(history, max_entries=max_entries, lake_exact=lake_exact, said_whole=said_whole)
    assert by_event == by_row


def test_a_key_inserted_in_one_run_and_deleted_in_a_later_one_is_nothing() -> None:
    assert compose([((1,), "U", (1, "a"), False), ((1,), "D", None, True)]) is None
    deleted = compose([((1,), "U", (1, "a"), True), ((1,), "D", None, True)])
    assert deleted == ((1,), "D", None, True)


def test_a_later_run_lacking_values_takes_them_from_the_runs_before_back_to_a_delete() -> None:
    entries = [
        ((1,), "U", (1, "first", 1), True),
        ((1,), "U", (1, "second", ABSENT), True),
        ((1,), "U", (1, ABSENT, 3), True),
    ]
    assert compose(entries) == ((1,), "U", (1, "second", 3), True)
    after_delete = [((1,), "U", (1, "x", 1), True), ((1,), "D", None, True)]
    after_delete.append(((1,), "U", (1, ABSENT, 9), True))
    assert compose(after_delete) == ((1,), "U", (1, ABSENT, 9), True)
