"""The pure parts of snapshots: the progress record, the plan file, chunk queries, table shapes."""

from __future__ import annotations

import datetime as dt
import importlib
import itertools
import json
import pickle
import sys
import zipfile
import zipimport
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from binlake.binlog.constants import ColumnType as T
from binlake.binlog.names import TableName
from binlake.binlog.tablemap import real_type_and_length
from binlake.binlog.values import column_spec
from binlake.cli.tables_option import parse_tables_option
from binlake.config import load_config
from binlake.errors import (
    ConfigError,
    SnapshotError,
    SnapshotPlanError,
    UnsupportedTypeError,
    UsageError,
)
from binlake.lake.catalog.snapshot_progress import (
    SNAPSHOT,
    SnapshotProgress,
    decode_key,
    encode_key,
    progress_of,
)
from binlake.lake.spark.chunk_jobs import steady_zip_imports
from binlake.lake.write.delta_files import DeltaLayout, parse_layout
from binlake.position import SourcePosition
from binlake.snapshot import chunk_files
from binlake.snapshot.chunk_files import FileTarget, write_chunk_file
from binlake.snapshot.chunk_task import ChunkPlan, KeyRange, chunk_query, chunk_source
from binlake.snapshot.columns import CopyColumn
from binlake.snapshot.copier import chunk_file_target
from binlake.snapshot.key_ranges import between, integer_bounds, ranges_between
from binlake.source.table_shape import ColumnInfo, table_map_from_columns
from binlake.storage.snapshot_plan import SnapshotPlan, take_requests, write_request
from binlake.typemap import IcebergType

pytestmark = pytest.mark.unit
N = TableName.parse


def test_key_values_survive_the_summary_round_trip_exactly() -> None:
    key = (
        7,
        -(2**63),
        Decimal("123.4500"),
        "ÿ text 'quoted'",
        b"\x00\xff",
        dt.date(2024, 2, 29),
        dt.datetime(2024, 1, 1, 12, 0, 0, 5),
        dt.timedelta(hours=-838, microseconds=-1),
        None,
    )
    back = decode_key(json.loads(json.dumps(encode_key(key))))
    assert back[:5] == key[:5] and back[8] is None
    assert back[5:8] == ("2024-02-29", "2024-01-01 12:00:00.000005", "-838:00:00.000001")


def test_progress_reads_back_from_a_commit_summary() -> None:
    at = SourcePosition("bin.000003", 1234)
    progress = SnapshotProgress("id-1", None, at, 80, False, next=(5, "x"))
    assert progress_of({SNAPSHOT: progress.to_json()}) == progress
    older = SnapshotProgress("id-1", (5, "x"), at, 80, False, version=1)  # chunk-by-chunk copy
    assert progress_of({SNAPSHOT: older.to_json()}) == older
    assert progress_of({"binlake.position": "bin.000001:4"}) is None
    assert progress_of({SNAPSHOT: "{not json"}) is None


def _id_layout(properties: dict[str, str]) -> DeltaLayout:
    """A table of one BIGINT key column ``id`` with ``properties``, as Iceberg's JSON gives it."""
    schema = {
        "type": "struct",
        "schema-id": 0,
        "identifier-field-ids": [1],
        "fields": [{"id": 1, "name": "id", "required": True, "type": "long"}],
    }
    spec, order = {"spec-id": 0, "fields": []}, {"order-id": 0, "fields": []}
    return parse_layout(
        json.dumps(schema),
        json.dumps(spec),
        json.dumps(order),
        properties,
        format_version=2,
        key=("id",),
    )


def test_a_copied_chunk_file_is_cut_into_row_groups_of_the_tables_size(tmp_path: Path) -> None:
    """A copy's tasks write the row groups the table's ``write.parquet.row-group-size-bytes``
    asks for (that many bytes of Arrow data each), so a reader can split a large copied file;
    a table without the property gets Iceberg's 128 MiB (here: one row group)."""
    small = chunk_file_target(
        str(tmp_path), "binlake-copy-x", _id_layout({"write.parquet.row-group-size-bytes": "16000"})
    )
    batches = [
        pa.record_batch([pa.array(range(n, n + 1000), pa.int64())], schema=small.schema)
        for n in range(0, 10_000, 1000)
    ]  # 8,000 bytes of Arrow data each
    path, _size, rows = write_chunk_file(small, 1, "a", iter(batches))
    assert path is not None and rows == 10_000
    groups = pq.ParquetFile(path).metadata
    assert [groups.row_group(i).num_rows for i in range(groups.num_row_groups)] == [2000] * 5
    large = chunk_file_target(str(tmp_path), "binlake-copy-y", _id_layout({}))
    path, _size, rows = write_chunk_file(large, 1, "a", iter(batches))
    assert path is not None and pq.ParquetFile(path).metadata.num_row_groups == 1


def test_a_chunk_file_keeps_dictionaries_only_where_they_make_the_first_page_smaller(
    tmp_path: Path,
) -> None:
    """As Iceberg's writer (parquet-mr) decides at a column's first page: distinct keys, text
    and decimals are written plain, a column of few values with a dictionary; the values read
    back are the same either way."""
    schema = pa.schema(
        [
            pa.field("id", pa.int32(), False),
            pa.field("v", pa.string()),
            pa.field("n", pa.decimal128(20, 0)),
            pa.field("few", pa.string()),
            pa.field("empty", pa.int64()),
        ]
    )
    rows = 30_000
    columns = [
        pa.array(range(rows), pa.int32()),
        pa.array([f"value {i}" for i in range(rows)]),
        pa.array([Decimal(2**64 - i) for i in range(rows)], pa.decimal128(20, 0)),
        pa.array([("red", "green", None)[i % 3] for i in range(rows)]),
        pa.array([None] * rows, pa.int64()),
    ]
    batch = pa.record_batch(columns, schema=schema)
    target = FileTarget(str(tmp_path), "binlake-copy-d", schema, {"max_rows_per_page": 20000})
    path, _size, written = write_chunk_file(target, 1, "a", iter([batch]))
    assert path is not None and written == rows
    group = pq.ParquetFile(path).metadata.row_group(0)
    dictionary = {
        group.column(i).path_in_schema: group.column(i).has_dictionary_page for i in range(5)
    }
    assert dictionary == {"id": False, "v": False, "n": False, "few": True, "empty": False}
    assert pq.read_table(path).equals(pa.Table.from_batches([batch]))
    assert chunk_files.with_dictionaries({"use_dictionary": True}, batch) == {
        "use_dictionary": True
    }


def test_chunk_tasks_keep_their_zip_importers_from_rereading_archives(tmp_path: Path) -> None:
    """pyspark's worker invalidates import caches before every task; the zip importers a chunk
    task's worker holds keep the directory they read (Spark's archives do not change)."""
    archive = tmp_path / "lib.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("lib_module.py", "X = 1\n")
    importer = zipimport.zipimporter(str(archive))
    key = f"{archive}/"
    sys.path_importer_cache[key] = importer
    try:
        steady_zip_imports()
        with zipfile.ZipFile(archive, "a") as zipped:
            zipped.writestr("other_module.py", "Y = 2\n")
        importlib.invalidate_caches()
        assert importer.find_spec("lib_module") is not None
        assert importer.find_spec("other_module") is None  # the directory read before stays
    finally:
        del sys.path_importer_cache[key]


def _plan(key: str, ranges: tuple[KeyRange, ...], *columns: CopyColumn) -> ChunkPlan:
    files = FileTarget("/nowhere", "binlake-copy-x", pa.schema([]))
    return ChunkPlan("db", "t", columns, key, ranges, (), files)


def _escape(value: object) -> str:
    return repr(value)


def test_a_chunk_reads_its_key_range_lower_bound_included_upper_excluded() -> None:
    spec = CopyColumn("id", "int", IcebergType.INT)
    plan = _plan("id", ranges_between(None, [100, 200]), spec)
    assert [chunk_query(plan, i, _escape) for i in range(3)] == [
        "SELECT `id` FROM `db`.`t` WHERE `id` < 100",
        "SELECT `id` FROM `db`.`t` WHERE `id` >= 100 AND `id` < 200",
        "SELECT `id` FROM `db`.`t` WHERE `id` >= 200",
    ]


def test_a_resumed_copy_left_with_one_chunk_reads_only_the_keys_from_its_start() -> None:
    """The copy resumed after a commit whose rest plans as one range (one key, or none, left
    at or after ``next``): its query keeps the lower bound; a plan bounding ranges on no column
    (it would read the table whole, its committed rows again) is refused."""
    spec = CopyColumn("id", "bigint", IcebergType.LONG)
    plan = _plan("id", ranges_between(243_902_441, []), spec)
    assert chunk_query(plan, 0, _escape) == "SELECT `id` FROM `db`.`t` WHERE `id` >= 243902441"
    with pytest.raises(SnapshotError, match="bounds its key ranges on no column"):
        _plan("", ranges_between(243_902_441, []), spec)


def test_a_table_without_key_is_read_whole_in_one_chunk_floats_as_double() -> None:
    spec = CopyColumn("f", "float", IcebergType.FLOAT)
    plan = _plan("", (KeyRange(),), spec)
    assert chunk_query(plan, 0, _escape) == "SELECT CAST(`f` AS DOUBLE) FROM `db`.`t`"


def test_integer_keys_split_into_equal_ranges_that_cover_every_key() -> None:
    bounds = integer_bounds(1, 24_000, 4)
    assert bounds == [6001, 12001, 18001]
    ranges = ranges_between(5, bounds)
    assert ranges[0] == KeyRange(5, 6001) and ranges[-1] == KeyRange(18001, None)
    assert all(a.upper == b.lower for a, b in itertools.pairwise(ranges))
    assert integer_bounds(7, 8, 5) == [8]  # never an empty range past the last key


def test_sampled_text_and_byte_candidates_lie_between_their_ends() -> None:
    assert "abc" < between("abc", "abz", 0.5) < "abz"
    middle = between(b"\x00\x10", b"\x00\xf0", 0.5)
    assert b"\x00\x10" < middle < b"\x00\xf0"
    assert between("0a1f", "0a1f9", 0.5).startswith("0a1f")


def _info(name: str, data_type: str, column_type: str, **kw: object) -> ColumnInfo:
    return ColumnInfo(name, data_type, column_type, True, **kw)  # type: ignore[arg-type]


def test_long_char_columns_keep_their_length_in_the_real_type_byte() -> None:
    columns = [
        _info("c", "char", "char(200)", octet_length=800, collation="utf8mb4_general_ci"),
        _info("s", "set", "set('a','b''c','d\\\\e')", collation="utf8mb4_general_ci"),
        _info("e", "enum", "enum('x','y')", collation="latin1_swedish_ci"),
        _info("bits", "bit", "bit(13)", numeric_precision=13),
    ]
    collations = {"utf8mb4_general_ci": 45, "latin1_swedish_ci": 8}
    tm = table_map_from_columns("db", "t", columns, [], collations)
    assert real_type_and_length(tm.column_types[0], tm.column_metadata[0]) == (T.STRING, 800)
    assert column_spec(tm, 1).labels == ("a", "b'c", "d\\e")
    assert column_spec(tm, 2).labels == ("x", "y")
    assert column_spec(tm, 3).length == 13
    assert tm.primary_key == ()


def test_a_type_without_mapping_is_refused_naming_table_and_column() -> None:
    with pytest.raises(UnsupportedTypeError, match="column v: source type vector") as caught:
        table_map_from_columns("db", "t", [_info("v", "vector", "vector(3)")], [], {})
    assert caught.value.table == "db.t"


def test_the_plan_keeps_a_table_until_its_own_snapshot_is_done(tmp_path: Path) -> None:
    plan = SnapshotPlan(tmp_path / "snapshot.plan")
    first = plan.add([N("db.a"), N("db.b")], "initial")[N("db.a")]
    again = plan.add([N("db.a")], "requested")[N("db.a")]
    assert again.id != first.id
    plan.done(first)  # an older copy finishing does not drop the newer request
    assert plan.read()[N("db.a")] == again
    plan.done(again)
    assert sorted(plan.read()) == [N("db.b")]


def test_requests_move_into_the_plan_and_are_removed(tmp_path: Path) -> None:
    plan = SnapshotPlan(tmp_path / "snapshot.plan")
    folder = tmp_path / "requests"
    write_request(folder, [N("db.x"), N("db.y")])
    write_request(folder, [N("db.x")])
    assert take_requests(folder, plan) == [N("db.x"), N("db.y"), N("db.x")]
    assert sorted(plan.read()) == [N("db.x"), N("db.y")]
    assert list(folder.iterdir()) == []
    assert take_requests(folder, plan) == []


def test_a_damaged_plan_is_a_typed_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "snapshot.plan"
    path.write_text('{"version": 9}')
    with pytest.raises(SnapshotPlanError, match="not valid") as caught:
        SnapshotPlan(path).read()
    assert caught.value.file == str(path)


def test_snapshot_tables_must_be_named_db_dot_table() -> None:
    assert parse_tables_option(" shop.a ,shop.b,shop.a") == [N("shop.a"), N("shop.b")]
    for bad in ("", "orders", "shop.", "a.b.c", "`we.ird db.t", "a.`b`c"):
        with pytest.raises(UsageError, match=r"--tables") as caught:
            parse_tables_option(bad)
        assert "backticks" in caught.value.hint


def test_awkward_names_are_pairs_in_the_plan_and_the_requests(tmp_path: Path) -> None:
    names = [
        TableName("we.ird db", "tâble x"),
        TableName("db", "a`b"),
        TableName("Shop", "Orders"),
        TableName("shop", "orders"),
        TableName("s p", "t,1"),
    ]
    text = ",".join(str(n) for n in names)
    assert parse_tables_option(text) == names
    plan = SnapshotPlan(tmp_path / "snapshot.plan")
    plan.add(names, "initial")
    assert sorted(SnapshotPlan(plan.path).read()) == sorted(names)
    folder = tmp_path / "requests"
    write_request(folder, names)
    assert sorted(take_requests(folder, plan)) == sorted(names)


def test_a_version_1_plan_and_request_are_read_at_their_first_dot(tmp_path: Path) -> None:
    path = tmp_path / "snapshot.plan"
    path.write_text(
        json.dumps({"version": 1, "tables": {"db.t.x": {"id": "7", "reason": "initial"}}})
    )
    (entry,) = SnapshotPlan(path).read().values()
    assert entry.table == TableName("db", "t.x") and entry.id == "7"
    folder = tmp_path / "requests"
    folder.mkdir()
    (folder / "1.request").write_text(json.dumps({"version": 1, "tables": ["shop.orders"]}))
    assert take_requests(folder, SnapshotPlan(path)) == [TableName("shop", "orders")]


@pytest.mark.parametrize(
    "data",
    [
        {"version": 2, "tables": [{"database": "", "table": "t", "id": "1", "reason": "x"}]},
        {"version": 2, "tables": [{"database": "db", "id": "1", "reason": "x"}]},
        {"version": 2, "tables": {"db.t": {"id": "1", "reason": "x"}}},
        {"version": 1, "tables": {"nodot": {"id": "1", "reason": "x"}}},
    ],
)
def test_a_plan_with_bad_names_is_a_typed_error(tmp_path: Path, data: object) -> None:
    path = tmp_path / "snapshot.plan"
    path.write_text(json.dumps(data))
    with pytest.raises(SnapshotPlanError, match="not valid") as caught:
        SnapshotPlan(path).read()
    assert caught.value.file == str(path) and caught.value.hint


def test_chunk_tasks_carry_no_password_and_read_it_on_the_executor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "s3cret-for-executors"
    path = tmp_path / "binlake.toml"
    path.write_text(
        '[source]\nhost = "db.example"\nuser = "repl"\nserver_id = 7\n'
        'password_env = "TEST_CHUNK_PASSWORD"\n[state]\ndir = "./state"\n'
    )
    source = chunk_source(load_config(path, {"TEST_CHUNK_PASSWORD": secret}).source)
    assert secret.encode() not in pickle.dumps(source)  # what a Spark task carries
    assert secret not in repr(source)
    monkeypatch.setenv("TEST_CHUNK_PASSWORD", secret)  # the executor's environment
    assert source.password() == secret.encode()
    monkeypatch.delenv("TEST_CHUNK_PASSWORD")
    with pytest.raises(ConfigError) as caught:
        source.password()
    assert caught.value.field == "source.password_env" and "spark-env.sh" in caught.value.hint
    (tmp_path / "pw").write_text(secret + "\n")
    by_file = chunk_source(replace(load_config(path, {"TEST_CHUNK_PASSWORD": "x"}).source,
                                   password_env=None, password_file=tmp_path / "pw"))  # fmt: skip
    assert by_file.password() == secret.encode() and secret.encode() not in pickle.dumps(by_file)


def test_a_chunk_file_is_made_durable_with_every_folder_up_to_the_warehouse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The table's folders are the JVM's, never fsynced: each one's entry up to the warehouse
    folder is fsynced with the file (a power cut would take a new table's files along), and no
    folder above the warehouse."""
    synced: list[Path] = []
    monkeypatch.setattr(chunk_files, "fsync_dir", lambda folder, _purpose: synced.append(folder))
    warehouse = tmp_path / "warehouse"
    data = warehouse / "db" / "t" / "data"
    files = chunk_file_target(str(data), "binlake-copy-x", _id_layout({}), warehouse)
    batch = pa.record_batch([pa.array(range(10), pa.int64())], schema=files.schema)
    path, _size, _rows = write_chunk_file(files, 1, "a", iter([batch]))
    assert path is not None
    assert synced == [data, data.parent, data.parent.parent, warehouse]
