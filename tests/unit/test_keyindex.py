"""The key index package (``binlake.keyindex``), pure: keys as canonical bytes, one index file
(lookups, one transaction of changes, every value CRC-checked), the files of a table (generations,
the rebuild's durable rename), and every way a file can be untrue: it is refused as
``KeyIndexUntrustedError`` (rebuilt by the lake) or, written by a newer binlake, with a typed
error and a hint."""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from binlake.errors import (
    DiskFullError,
    KeyIndexDuplicateKeyError,
    KeyIndexError,
    KeyIndexUntrustedError,
    KeyIndexVersionError,
)
from binlake.keyindex.encode import encode_keys, key_spec, type_family
from binlake.keyindex.folder import IndexFolder
from binlake.keyindex.store import FORMAT_VERSION, IndexedFile, KeyIndex

UUID = "7d3b1c6e-0000-4000-8000-000000000001"
OTHER = "7d3b1c6e-0000-4000-8000-000000000002"
SPEC = "1:int"
DATA_A = "file:/lake/db/t/data/a.parquet"
DATA_B = "file:/lake/db/t/data/b.parquet"


def ints(*values: int) -> list[bytes]:
    return encode_keys([pa.array(values, pa.int64())])


def built(folder: IndexFolder, rows: dict[str, range], snapshot: int | None = 10) -> KeyIndex:
    """An index of ``UUID`` whose data file ``path`` holds keys ``rows[path]`` at positions 0..n."""
    builder = folder.builder(UUID, SPEC)
    for path, keys in rows.items():
        builder.add(path, ints(*keys), range(len(keys)))
    builder.finish(snapshot)
    return folder.install(builder)


# ---- keys as bytes ------------------------------------------------------------------------------


def test_integers_encode_as_8_bytes_big_endian_whatever_their_width() -> None:
    assert encode_keys([pa.array([1, -1], pa.int32())]) == [
        b"\x00\x00\x00\x00\x00\x00\x00\x01",
        b"\xff\xff\xff\xff\xff\xff\xff\xff",
    ]
    assert encode_keys([pa.array([7], pa.int32())]) == encode_keys([pa.array([7], pa.int64())])


def test_decimals_encode_their_unscaled_value_in_16_bytes_whatever_the_precision() -> None:
    narrow = pa.array([Decimal("-1.25"), Decimal("3.00")], pa.decimal128(5, 2))
    wide = pa.array([Decimal("-1.25"), Decimal("3.00")], pa.decimal128(20, 2))
    assert encode_keys([narrow]) == encode_keys([wide])
    assert encode_keys([narrow])[0] == (-125).to_bytes(16, "big", signed=True)
    assert encode_keys([narrow])[1] == (300).to_bytes(16, "big", signed=True)


def test_timestamps_and_dates_encode_as_their_number_and_a_zone_label_changes_nothing() -> None:
    utc = pa.array([1_700_000_000_123_456], pa.timestamp("us", tz="UTC"))
    other = pa.array([1_700_000_000_123_456], pa.timestamp("us", tz="Europe/Paris"))
    naive = pa.array([1_700_000_000_123_456], pa.timestamp("us"))
    assert encode_keys([utc]) == encode_keys([other]) == encode_keys([naive])
    assert encode_keys([utc]) == ints(1_700_000_000_123_456)
    assert encode_keys([pa.array([19000], pa.date32())]) == ints(19000)


def test_strings_are_utf8_binary_is_raw_and_composite_keys_are_length_prefixed() -> None:
    assert encode_keys([pa.array(["é"], pa.string())]) == [b"\xc3\xa9"]
    assert encode_keys([pa.array([b"\x00\xff"], pa.binary())]) == [b"\x00\xff"]
    # ("ab", "c") and ("a", "bc") would run together without the lengths
    first = encode_keys([pa.array(["ab", "a"]), pa.array(["c", "bc"])])
    assert first[0] != first[1]
    assert first[0] == b"\x00\x00\x00\x02ab\x00\x00\x00\x01c"


def test_a_null_key_or_a_float_key_is_a_typed_error() -> None:
    with pytest.raises(KeyIndexError) as null:
        encode_keys([pa.array([1, None], pa.int64())])
    assert null.value.reason == "null key" and null.value.hint
    with pytest.raises(KeyIndexError) as floating:
        encode_keys([pa.array([1.5], pa.float64())])
    assert floating.value.reason == "key type"
    with pytest.raises(KeyIndexError):
        type_family("double")


def test_the_key_spec_names_field_ids_and_families_so_widening_keeps_an_index() -> None:
    assert key_spec([(1, "int"), (4, "string")]) == key_spec([(1, "long"), (4, "string")])
    assert key_spec([(1, "decimal(10,2)")]) == key_spec([(1, "decimal(12, 2)")]) == "1:decimal/2"
    assert key_spec([(1, "decimal(10,2)")]) != key_spec([(1, "decimal(10,3)")])
    assert key_spec([(1, "long")]) != key_spec([(2, "long")])


# ---- one index file -----------------------------------------------------------------------------


def test_a_rebuilt_index_finds_each_keys_file_and_position_and_names_its_snapshot(
    tmp_path: Path,
) -> None:
    folder = IndexFolder(tmp_path / "keyindex")
    index = built(folder, {DATA_A: range(0, 100), DATA_B: range(100, 150)}, snapshot=42)
    assert index.snapshot == 42 and index.meta.entries == 150
    found = index.lookup(ints(5, 120, 999))
    assert set(found) == set(ints(5, 120))
    paths = index.paths(file for file, _ in found.values())
    assert {(paths[f], p) for f, p in found.values()} == {(DATA_A, 5), (DATA_B, 20)}
    index.close()
    again = folder.open(UUID, SPEC)
    assert again.snapshot == 42
    assert list(again.entries_of(DATA_B))[:2] == [(ints(100)[0], 0), (ints(101)[0], 1)]


def test_a_batch_moves_keys_and_the_snapshot_in_one_transaction(tmp_path: Path) -> None:
    folder = IndexFolder(tmp_path / "keyindex")
    index = built(folder, {DATA_A: range(10)}, snapshot=1)
    new = "file:/lake/db/t/data/new.parquet"
    index.begin()
    index.remove(ints(3, 4))
    index.put(new, ints(3, 50), [0, 1])
    index.rollback()  # a commit that failed: nothing changed
    assert index.snapshot == 1 and index.lookup(ints(3))[ints(3)[0]][1] == 3
    index.begin()
    index.remove(ints(3, 4))
    index.put(IndexedFile(new, 2, '{"1000":3}'), ints(3, 50), [0, 1])  # spec 2, a partition
    index.commit(2)
    index.close()
    reopened = folder.open(UUID, SPEC)
    assert reopened.snapshot == 2 and reopened.meta.entries == 10 - 2 + 2
    found = reopened.lookup(ints(3, 4, 50))
    assert ints(4)[0] not in found
    assert {reopened.paths([f])[f] for f, _ in found.values()} == {new}
    files = reopened.files([found[ints(3)[0]][0], reopened.lookup(ints(0))[ints(0)[0]][0]])
    assert sorted(files.values(), key=lambda f: f.path) == [
        IndexedFile(DATA_A, 0, "{}"),  # a builder's file given by path: unpartitioned
        IndexedFile(new, 2, '{"1000":3}'),
    ]
    reopened.begin()
    reopened.drop_files([DATA_A])  # a compaction removed it
    reopened.commit(3)
    assert reopened.meta.entries == 2 and not reopened.lookup(ints(0, 1, 2))


def test_an_updated_key_moves_in_place_and_leaves_with_its_new_data_file(
    tmp_path: Path,
) -> None:
    folder = IndexFolder(tmp_path / "keyindex")
    index = built(folder, {DATA_A: range(10), DATA_B: range(10, 20)}, snapshot=1)
    index.begin()
    index.move(DATA_B, ints(7, 2), [20, 21])  # given out of key order
    index.commit(2)
    found = index.lookup(ints(2, 7, 3))
    assert index.meta.entries == 20
    assert {k: (index.paths([f])[f], p) for k, (f, p) in found.items()} == {
        ints(2)[0]: (DATA_B, 21),
        ints(7)[0]: (DATA_B, 20),
        ints(3)[0]: (DATA_A, 3),
    }
    index.begin()
    index.drop_files([DATA_B, "file:/lake/db/t/data/never.parquet"])
    index.commit(3)
    assert index.meta.entries == 8 and not index.lookup(ints(2, 7, 10))
    index.begin()
    with pytest.raises(KeyIndexUntrustedError) as error:
        index.move(DATA_A, ints(3, 99), [0, 1])  # 99: a key it does not hold
    assert error.value.reason == "damaged"
    index.rollback()
    index.close()
    assert folder.open(UUID, SPEC).meta.entries == 8


def test_rows_deleted_by_position_lose_their_entries_unless_their_key_moved_on(
    tmp_path: Path,
) -> None:
    """``remove_at`` (a catch-up over another commit's position deletes): an entry naming a
    deleted row goes; an entry of the same key that names another row stays (the key's row
    moved on before), and so do positions no entry names and files the index does not hold."""
    folder = IndexFolder(tmp_path / "keyindex")
    index = built(folder, {DATA_A: range(10), DATA_B: range(10, 20)}, snapshot=1)
    index.begin()
    index.move(DATA_B, ints(4), [10])  # key 4 left A's row 4 for B's row 10
    index.commit(2)
    index.begin()
    gone = {DATA_A: [1, 4, 8], DATA_B: [3], "file:/lake/db/t/data/never.parquet": [0]}
    index.remove_at(gone)
    index.commit(3)
    assert index.meta.entries == 17
    found = index.lookup(ints(*range(20)))
    assert {k for k in ints(*range(20)) if k not in found} == set(ints(1, 8, 13))
    f, pos = found[ints(4)[0]]
    assert (index.paths([f])[f], pos) == (DATA_B, 10)
    index.close()
    assert folder.open(UUID, SPEC).meta.entries == 17


def test_a_full_disk_while_adding_entries_is_a_typed_error_and_changes_nothing(
    tmp_path: Path,
) -> None:
    folder = IndexFolder(tmp_path / "keyindex")
    index = built(folder, {DATA_A: range(2_000)}, snapshot=1)
    index.begin()
    (pages,) = index._conn.execute("PRAGMA page_count").fetchone()
    index._conn.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own "disk is full"
    new = "file:/lake/db/t/data/new.parquet"
    with pytest.raises(DiskFullError) as error:  # inside ``_placing``, as ``move``'s would be
        index.put(new, ints(*range(10_000, 20_000)), range(10_000))
    assert error.value.file == str(index.path)
    index.rollback()
    index.close()
    reopened = folder.open(UUID, SPEC)
    assert reopened.snapshot == 1 and reopened.meta.entries == 2_000
    assert reopened.lookup(ints(5))[ints(5)[0]][1] == 5


def test_a_key_added_twice_is_a_duplicate_key_error(tmp_path: Path) -> None:
    folder = IndexFolder(tmp_path / "keyindex")
    index = built(folder, {DATA_A: range(3)})
    index.begin()
    with pytest.raises(KeyIndexDuplicateKeyError) as error:
        index.put(DATA_B, ints(2), [0])
    assert error.value.hint and "verify" in error.value.hint
    index.rollback()
    builder = folder.builder(UUID, SPEC)
    builder.add(DATA_A, ints(1, 1), [0, 1])
    with pytest.raises(KeyIndexDuplicateKeyError):
        builder.finish(5)
    builder.abandon()


def sql(path: Path, statement: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute(statement)
    conn.commit()
    conn.close()


def test_an_entry_or_a_path_that_fails_its_crc_is_never_used(tmp_path: Path) -> None:
    folder = IndexFolder(tmp_path / "keyindex")
    index = built(folder, {DATA_A: range(10)})
    path = index.path
    index.close()
    sql(path, "UPDATE entries SET pos = pos + 1 WHERE pos = 4")
    tampered = folder.open(UUID, SPEC)  # the structure is sound; the value is not
    with pytest.raises(KeyIndexUntrustedError) as entry:
        tampered.lookup(ints(4))
    assert entry.value.reason == "crc"
    tampered.close()
    sql(path, "UPDATE files SET path = 'file:/elsewhere.parquet'")
    with pytest.raises(KeyIndexUntrustedError) as moved:
        folder.open(UUID, SPEC).paths([1])
    assert moved.value.reason == "crc"


@pytest.mark.parametrize(
    ("statement", "reason"),
    [
        ("UPDATE meta SET snapshot = 99", "crc"),
        ("DELETE FROM entries WHERE pos < 3", "damaged"),  # lost entries: the count tells
        ("DELETE FROM meta", "damaged"),
        # an older binlake's file (version 2: a second index on (file, pos)) is rebuilt
        (f"PRAGMA user_version = {FORMAT_VERSION - 1}", "older version"),
        ("UPDATE files SET partition = '{\"1000\":1}' WHERE id = 1", "crc"),
        ("UPDATE files SET spec = 3 WHERE id = 1", "crc"),
    ],
)
def test_a_meta_row_or_count_that_is_not_true_refuses_the_index(
    tmp_path: Path, statement: str, reason: str
) -> None:
    folder = IndexFolder(tmp_path / "keyindex")
    index = built(folder, {DATA_A: range(10)})
    index.close()
    sql(index.path, statement)
    with pytest.raises(KeyIndexUntrustedError) as error:
        opened = folder.open(UUID, SPEC)
        opened.files([1])
        opened.confirm()
    assert error.value.reason == reason, error.value.message


def test_an_index_of_another_table_or_key_or_none_at_all_is_refused(tmp_path: Path) -> None:
    folder = IndexFolder(tmp_path / "keyindex")
    with pytest.raises(KeyIndexUntrustedError) as missing:
        folder.open(UUID, SPEC)
    assert missing.value.reason == "missing"
    index = built(folder, {DATA_A: range(10)})
    index.close()
    with pytest.raises(KeyIndexUntrustedError) as key:
        folder.open(UUID, "1:string")
    assert key.value.reason == "key changed"
    foreign = folder.path(OTHER, 1)
    foreign.write_bytes(index.path.read_bytes())  # another table's name on this one's file
    with pytest.raises(KeyIndexUntrustedError) as other:
        folder.open(OTHER, SPEC)
    assert other.value.reason == "other table"


def test_an_index_of_a_newer_format_is_a_typed_error_with_a_hint_and_is_left_alone(
    tmp_path: Path,
) -> None:
    folder = IndexFolder(tmp_path / "keyindex")
    index = built(folder, {DATA_A: range(10)})
    index.close()
    sql(index.path, f"PRAGMA user_version = {FORMAT_VERSION + 1}")
    before = index.path.read_bytes()
    with pytest.raises(KeyIndexVersionError) as error:
        folder.open(UUID, SPEC)
    assert error.value.version == FORMAT_VERSION + 1
    assert "remove the named file" in error.value.hint and error.value.file == str(index.path)
    assert index.path.read_bytes() == before


def many_rows_index(tmp_path: Path) -> tuple[IndexFolder, Path]:
    folder = IndexFolder(tmp_path / "keyindex")
    index = built(folder, {DATA_A: range(20_000), DATA_B: range(20_000, 40_000)})
    index.close()
    assert index.path.stat().st_size > 200_000
    return folder, index.path


def test_the_whole_file_check_runs_beside_the_first_batch_and_its_failure_stays(
    tmp_path: Path,
) -> None:
    folder, path = many_rows_index(tmp_path)
    sound = folder.open(UUID, SPEC)  # a batch's lookups and changes while it checks
    sound.begin()
    found = sound.lookup(ints(5, 25_000))
    sound.move(DATA_B, list(found), [40_000, 40_001])
    sound.put(DATA_B, ints(*range(50_000, 50_100)), range(40_002, 40_102))
    sound.commit(11)  # the check reads one snapshot: before this commit or after, it agrees
    sound.confirm()
    assert sound.confirmed and sound.meta.entries == 40_100
    sound.close()
    sql(path, "DELETE FROM entries WHERE pos = 7")  # an entry lost: only the count tells
    lost = folder.open(UUID, SPEC)
    assert len(lost.lookup(ints(1, 2, 3))) == 3 and not lost.confirmed
    for _ in range(2):  # every later call fails too: its answers are never used
        with pytest.raises(KeyIndexUntrustedError) as error:
            lost.confirm()
        assert error.value.reason == "damaged" and "entries" in error.value.message
    lost.close()


def test_bytes_overwritten_in_the_middle_of_an_index_file_refuse_it(tmp_path: Path) -> None:
    folder, path = many_rows_index(tmp_path)
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 3000] = bytes(range(256)) * 11 + bytes(184)
    path.write_bytes(bytes(data))
    with pytest.raises(KeyIndexUntrustedError) as error:
        folder.open(UUID, SPEC).confirm()  # the check beside the first batch finds it
    assert error.value.reason in {"damaged", "crc"}, error.value.message


def test_a_truncated_index_file_is_refused(tmp_path: Path) -> None:
    folder, path = many_rows_index(tmp_path)
    with path.open("r+b") as f:
        f.truncate(path.stat().st_size // 2)
    with pytest.raises(KeyIndexUntrustedError) as error:
        folder.open(UUID, SPEC)
    assert error.value.reason == "damaged", error.value.message


def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    folder = IndexFolder(tmp_path / "keyindex")
    folder.folder.mkdir()
    folder.path(UUID, 1).write_bytes(b"not sqlite at all" * 300)
    with pytest.raises(KeyIndexUntrustedError) as error:
        folder.open(UUID, SPEC)
    assert error.value.reason == "damaged"


# ---- the folder: generations and the rebuild's rename -----------------------------------------


def test_a_rebuild_takes_the_next_generation_and_removes_the_older_one_and_its_wal(
    tmp_path: Path,
) -> None:
    folder = IndexFolder(tmp_path / "keyindex")
    first = built(folder, {DATA_A: range(5)}, snapshot=1)
    first.begin()
    first.put(DATA_B, ints(9), [0])
    first.commit(2)  # leaves a -wal beside the first generation
    second = built(folder, {DATA_B: range(3)}, snapshot=7)
    assert second.path == folder.path(UUID, 2)
    names = {p.name for p in folder.folder.iterdir()}
    assert not any(name.startswith(first.path.name) for name in names)
    assert folder.open(UUID, SPEC).snapshot == 7


def test_a_rebuild_cut_short_before_its_rename_leaves_the_index_before_it(tmp_path: Path) -> None:
    folder = IndexFolder(tmp_path / "keyindex")
    built(folder, {DATA_A: range(5)}, snapshot=1).close()
    builder = folder.builder(UUID, SPEC)
    builder.add(DATA_B, ints(1, 2), [0, 1])
    builder.finish(2)  # fsynced under its temporary name; a crash comes before the rename
    assert builder.path.exists() and builder.path.name.endswith(".tmp")
    index = folder.open(UUID, SPEC)
    assert index.snapshot == 1 and index.path == folder.path(UUID, 1)
    assert not builder.path.exists()  # the leftover went at open


def test_an_index_lookup_is_per_key_and_answers_in_chunks(tmp_path: Path) -> None:
    folder = IndexFolder(tmp_path / "keyindex")
    index = built(folder, {DATA_A: range(2000)})
    found = index.lookup(ints(*range(0, 4000, 2)))  # more keys than one statement takes
    assert len(found) == 1000
    assert all(pos == int.from_bytes(key, "big", signed=True) for key, (_, pos) in found.items())
