"""Embedded-catalog rows a power cut left ahead of their files are set back on start
(binlake.lake.catalog.lost_commits; the power-cut tests in tests/crash show the cut itself)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from binlake.errors import TargetError
from binlake.lake.catalog.embedded import prepare_embedded_catalog
from binlake.lake.catalog.lost_commits import LOST_COMMIT, whole_metadata
from binlake.lake.catalog.metadata import CATALOG_FILE

pytestmark = pytest.mark.unit

CATALOG = "lake"
SYNC = bytes(range(16))


def avro_long(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = zigzag & 0x7F
        zigzag >>= 7
        if zigzag:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def avro_file(blocks: int = 1) -> bytes:
    """An Avro container file: header (one metadata entry), ``blocks`` blocks of 3 bytes."""
    key, value = b"avro.schema", b'"long"'
    header = b"Obj\x01" + avro_long(1) + avro_long(len(key)) + key
    header += avro_long(len(value)) + value + avro_long(0) + SYNC
    body = b"".join(avro_long(1) + avro_long(3) + b"abc" + SYNC for _ in range(blocks))
    return header + body


class Table:
    """A table folder of the warehouse with numbered metadata files and their manifest lists."""

    def __init__(self, warehouse: Path, name: str = "t") -> None:
        self.folder = warehouse / "db" / name
        self.meta = self.folder / "metadata"
        self.meta.mkdir(parents=True)
        self.name = name

    def version(
        self, number: int, uuid: str = "0000-aaaa", *, manifest: bytes | None = None
    ) -> Path:
        manifest_list = self.meta / f"snap-{number}-{uuid}.avro"
        manifest_list.write_bytes(avro_file() if manifest is None else manifest)
        path = self.meta / f"{number:05d}-{uuid}.metadata.json"
        snapshot = {"snapshot-id": number, "manifest-list": str(manifest_list)}
        metadata = {
            "current-snapshot-id": number,
            "refs": {"main": {"snapshot-id": number, "type": "branch"}},
            "snapshots": [snapshot],
        }
        path.write_text(json.dumps(metadata))
        return path


def catalog(warehouse: Path) -> Path:
    prepare_embedded_catalog(warehouse, CATALOG)
    return warehouse / CATALOG_FILE


def point(warehouse: Path, table: Table, location: Path, previous: Path | None = None) -> None:
    with sqlite3.connect(warehouse / CATALOG_FILE) as db:
        db.execute(
            "INSERT OR REPLACE INTO iceberg_tables VALUES (?, 'db', ?, ?, ?)",
            (CATALOG, table.name, str(location), None if previous is None else str(previous)),
        )


def location_of(warehouse: Path, table: Table) -> str | None:
    with sqlite3.connect(warehouse / CATALOG_FILE) as db:
        row = db.execute(
            "SELECT metadata_location FROM iceberg_tables WHERE table_name = ?", (table.name,)
        ).fetchone()
    return None if row is None else str(row[0])


def test_a_whole_current_metadata_file_is_left_as_it_is(tmp_path: Path) -> None:
    catalog(tmp_path)
    table = Table(tmp_path)
    first, second = table.version(1), table.version(2)
    point(tmp_path, table, second, first)
    prepare_embedded_catalog(tmp_path, CATALOG)
    assert location_of(tmp_path, table) == str(second)


def test_a_row_whose_metadata_file_is_gone_is_set_back_to_its_previous_one(tmp_path: Path) -> None:
    catalog(tmp_path)
    table = Table(tmp_path)
    first, second = table.version(1), table.version(2)
    point(tmp_path, table, second, first)
    second.unlink()
    prepare_embedded_catalog(tmp_path, CATALOG)
    assert location_of(tmp_path, table) == str(first)


def test_a_torn_metadata_file_with_its_previous_lost_too_falls_back_to_the_newest_whole_one(
    tmp_path: Path,
) -> None:
    catalog(tmp_path)
    table = Table(tmp_path)
    first = table.version(1)
    second, third = table.version(2), table.version(3)
    point(tmp_path, table, third, second)
    third.write_bytes(third.read_bytes()[:20])  # torn: not JSON
    second.unlink()
    prepare_embedded_catalog(tmp_path, CATALOG)
    assert location_of(tmp_path, table) == str(first.absolute())


def test_a_metadata_file_whose_manifest_list_is_cut_short_is_not_whole(tmp_path: Path) -> None:
    table = Table(tmp_path)
    whole = table.version(1)
    torn = table.version(2, manifest=avro_file(2)[:-5])
    missing = table.version(3)
    (table.meta / "snap-3-0000-aaaa.avro").unlink()
    assert whole_metadata(whole)
    assert not whole_metadata(torn)
    assert not whole_metadata(missing)


def test_a_table_whose_creation_was_lost_leaves_the_catalog(tmp_path: Path) -> None:
    catalog(tmp_path)
    table = Table(tmp_path)
    first = table.version(1)
    point(tmp_path, table, first)
    for path in table.meta.iterdir():
        path.unlink()
    prepare_embedded_catalog(tmp_path, CATALOG)
    assert location_of(tmp_path, table) is None


def test_two_whole_versions_of_one_number_are_refused_with_the_lost_file_named(
    tmp_path: Path,
) -> None:
    catalog(tmp_path)
    table = Table(tmp_path)
    table.version(1, "0000-aaaa")
    table.version(1, "0000-bbbb")  # a commit that lost a race left its file
    second = table.version(2)
    point(tmp_path, table, second)
    second.unlink()
    with pytest.raises(TargetError) as raised:
        prepare_embedded_catalog(tmp_path, CATALOG)
    assert (raised.value.check, raised.value.file) == (LOST_COMMIT, str(second))
    assert "snapshot --tables" in raised.value.hint
    assert location_of(tmp_path, table) == str(second)  # nothing changed


def test_a_table_with_no_whole_version_left_is_refused(tmp_path: Path) -> None:
    catalog(tmp_path)
    table = Table(tmp_path)
    first = table.version(1, manifest=b"Obj\x01")
    second = table.version(2)
    point(tmp_path, table, second, first)
    second.unlink()
    with pytest.raises(TargetError, match="no whole metadata file"):
        prepare_embedded_catalog(tmp_path, CATALOG)
