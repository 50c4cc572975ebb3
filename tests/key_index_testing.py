"""What the key index and row delta tests share: a table's index as the state folder holds it,
the positions of the table's live rows as Spark reads them, the kinds of its live delete files,
ways to damage an index file or a delete file, and statements run on the source one transaction
each."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

from binlake.binlog.names import TableName
from binlake.config import load_config
from binlake.keyindex.folder import IndexFolder
from binlake.lake.catalog.target import lake_target
from binlake.lake.spark.lineage import table_metadata
from binlake_dev.sandbox import MariaDBSandbox

#: Iceberg's content codes of delete files (the ``delete_files`` metadata table).
POSITION_DELETES, EQUALITY_DELETES = 1, 2


def run_sql(source: MariaDBSandbox, database: str, *statements: str) -> None:
    """Each statement in a transaction of its own, in ``database``."""
    with source.connect(database, autocommit=False) as conn, conn.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)
            conn.commit()


def lake_name(config: Path, table: str) -> str:
    return lake_target(load_config(config)).lake_table(TableName.parse(table))


def index_path(config: Path, spark: Any, table: str) -> Path:
    """The index file of ``table`` (``db.t``) in the state folder (it must exist)."""
    folder = IndexFolder(load_config(config).state.keyindex_dir)
    uuid = table_metadata(spark, lake_name(config, table))["table-uuid"]
    path = folder.current(uuid)
    assert path is not None, f"no key index of {table} in {folder.folder}"
    return path


def index_entries(
    config: Path, spark: Any, table: str
) -> tuple[int | None, set[tuple[int, str, int]]]:
    """(the index's snapshot, its (integer key, data file, position) entries), read with
    SQLite directly."""
    with sqlite3.connect(index_path(config, spark, table)) as conn:
        (snapshot,) = conn.execute("SELECT snapshot FROM meta").fetchone()
        rows = conn.execute(
            "SELECT e.key, f.path, e.pos FROM entries e JOIN files f ON f.id = e.file"
        ).fetchall()
    conn.close()
    return snapshot, {(int.from_bytes(k, "big", signed=True), p, pos) for k, p, pos in rows}


def lake_positions(
    spark: Any, config: Path, table: str, key: str = "id"
) -> set[tuple[int, str, int]]:
    """(key, data file, position) of every live row, as Spark reads the table."""
    name = lake_name(config, table)
    spark.sql(f"REFRESH TABLE {name}")
    rows = spark.sql(f"SELECT {key}, _file, _pos FROM {name}").collect()
    return {(int(r[0]), str(r[1]), int(r[2])) for r in rows}


def current_snapshot(spark: Any, config: Path, table: str) -> int:
    return int(table_metadata(spark, lake_name(config, table))["current-snapshot-id"])


def assert_index_matches_the_table(spark: Any, config: Path, table: str) -> None:
    """The index names the table's current snapshot and holds exactly its live rows, each data
    file with its partition spec."""
    snapshot, entries = index_entries(config, spark, table)
    assert snapshot == current_snapshot(spark, config, table)
    assert entries == lake_positions(spark, config, table)
    with sqlite3.connect(index_path(config, spark, table)) as conn:
        indexed = dict(conn.execute("SELECT path, spec FROM files").fetchall())
    conn.close()
    name = lake_name(config, table)
    live = spark.sql(f"SELECT DISTINCT _file, _spec_id FROM {name}").collect()
    assert {str(r[0]): int(r[1]) for r in live} == {f: indexed[f] for f in {e[1] for e in entries}}


def live_delete_kinds(spark: Any, config: Path, table: str) -> list[int]:
    """The content code of each live delete file of the table."""
    name = lake_name(config, table)
    spark.sql(f"REFRESH TABLE {name}")
    return sorted(
        int(r[0]) for r in spark.sql(f"SELECT content FROM {name}.delete_files").collect()
    )


def damage(path: Path, how: str, other: Path | None = None) -> None:
    """Damage an index file: ``middle`` (bytes overwritten in its middle), ``truncate`` (cut in
    half), ``missing`` (removed), ``foreign`` (another table's index put in its place)."""
    conn = sqlite3.connect(path)  # what the WAL holds goes into the file first
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    if how == "middle":
        data = bytearray(path.read_bytes())
        middle = len(data) // 2
        data[middle : middle + 2048] = bytes(range(256)) * 8
        path.write_bytes(bytes(data))
    elif how == "truncate":
        with path.open("r+b") as f:
            f.truncate(path.stat().st_size // 2)
    elif how == "missing":
        path.unlink()
    elif how == "foreign":
        assert other is not None
        shutil.copyfile(other, path)
    else:
        raise ValueError(how)


def damage_delete_file(delete_file: Any, how: str) -> bytes:
    """Damage a delete file of a local warehouse (Iceberg's ``DeleteFile``, a DV or a Parquet
    position-delete file): ``missing`` (removed), ``truncated`` (a DV: cut in the middle of its
    blob, which is all a reader reads of it; a Parquet file: cut in half), ``flipped`` (a byte
    in the middle of a DV's blob, which its CRC covers), ``not parquet`` (text put in its
    place). Hadoop's checksum file beside it goes too: an object store keeps none, binlake's own
    checks must catch it. The bytes it held, to restore it with."""
    path = Path(str(delete_file.location()).removeprefix("file:"))
    held = path.read_bytes()
    path.with_name(f".{path.name}.crc").unlink(missing_ok=True)
    offset = delete_file.contentOffset()  # a DV's blob (None: a Parquet file)
    middle = len(held) // 2
    if offset is not None:
        middle = int(offset) + int(delete_file.contentSizeInBytes()) // 2
    if how == "missing":
        path.unlink()
    elif how == "truncated":
        with path.open("r+b") as f:
            f.truncate(middle)
    elif how == "flipped":
        assert offset is not None, "only a DV's blob carries a CRC of ours"
        data = bytearray(held)
        data[middle] ^= 0x01
        path.write_bytes(bytes(data))
    elif how == "not parquet":
        path.write_bytes(b"not a parquet file\n" * 40)
    else:
        raise ValueError(how)
    return held
