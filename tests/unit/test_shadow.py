"""Shadow-page state file: prepare/commit/rollback/recover, layout, and damage handling."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from binlake.errors import (
    FileAccessError,
    NotAStateFileError,
    StateFileCorruptError,
    StateFileError,
    StatePayloadTooLargeError,
    XidMismatchError,
)
from binlake.storage.durable import FSYNC_COUNTS
from binlake.storage.shadow import (
    HEADER_SIZE,
    PAGE_OVERHEAD,
    REGION,
    ShadowStateFile,
    page_offset,
)


def new_file(tmp_path: Path, initial: bytes = b"initial", page_size: int = REGION) -> Path:
    path = tmp_path / "state"
    ShadowStateFile.create(path, page_size, initial).close()
    return path


def flip_byte(path: Path, offset: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 0xFF
    path.write_bytes(bytes(raw))


def tear_header(path: Path, keep: int = 12) -> None:
    """What a torn header write leaves: a prefix of some header, then garbage."""
    raw = bytearray(path.read_bytes())
    raw[keep:HEADER_SIZE] = b"\xa5" * (HEADER_SIZE - keep)
    path.write_bytes(bytes(raw))


def committed_update(path: Path, xid: int, data: bytes) -> None:
    with ShadowStateFile.open(path) as state:
        state.prepare(xid, data)
        state.commit(xid)


# --- prepare / commit / rollback / recover ---------------------------------------------------


def test_new_file_reads_its_initial_payload_with_nothing_prepared(tmp_path: Path) -> None:
    path = new_file(tmp_path, b"hello")
    with ShadowStateFile.open(path) as state:
        assert state.read() == b"hello"
        assert state.recover() is None
        assert state.sequence == 1
        assert state.capacity == REGION - PAGE_OVERHEAD
        assert not state.header_recovered
    assert path.stat().st_size == 3 * REGION


def test_create_refuses_to_overwrite_an_existing_file(tmp_path: Path) -> None:
    path = new_file(tmp_path)
    with pytest.raises(StateFileError, match="already exists"):
        ShadowStateFile.create(path)


def test_create_refuses_a_page_size_that_is_not_4k_aligned(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="page size"):
        ShadowStateFile.create(tmp_path / "state", 5000)


def test_prepared_data_is_not_read_before_commit(tmp_path: Path) -> None:
    path = new_file(tmp_path, b"old")
    with ShadowStateFile.open(path) as state:
        state.prepare(7, b"new")
        assert state.read() == b"old"
        assert state.recover() == 7


def test_commit_makes_the_prepared_data_committed_across_reopen(tmp_path: Path) -> None:
    path = new_file(tmp_path, b"old")
    committed_update(path, 7, b"new")
    with ShadowStateFile.open(path) as state:
        assert state.read() == b"new"
        assert state.recover() is None
        assert state.sequence == 2


def test_rollback_keeps_the_committed_data_across_reopen(tmp_path: Path) -> None:
    path = new_file(tmp_path, b"old")
    with ShadowStateFile.open(path) as state:
        state.prepare(7, b"new")
        state.rollback(7)
        assert state.read() == b"old"
        assert state.recover() is None
    with ShadowStateFile.open(path) as state:
        assert state.read() == b"old"
        assert state.recover() is None


def test_a_prepared_xid_survives_reopen_and_can_be_committed_by_xid(tmp_path: Path) -> None:
    path = new_file(tmp_path, b"old")
    with ShadowStateFile.open(path) as state:
        state.prepare(42, b"new")
    with ShadowStateFile.open(path) as state:
        assert state.recover() == 42
        assert state.read() == b"old"
        state.commit(42)
    with ShadowStateFile.open(path) as state:
        assert state.read() == b"new"


def test_a_prepared_xid_survives_reopen_and_can_be_rolled_back_by_xid(tmp_path: Path) -> None:
    path = new_file(tmp_path, b"old")
    with ShadowStateFile.open(path) as state:
        state.prepare(42, b"new")
    with ShadowStateFile.open(path) as state:
        state.rollback(42)
    with ShadowStateFile.open(path) as state:
        assert state.read() == b"old"
        assert state.recover() is None


def test_commit_of_a_non_matching_xid_is_an_error_and_changes_nothing(tmp_path: Path) -> None:
    path = new_file(tmp_path, b"old")
    with ShadowStateFile.open(path) as state:
        state.prepare(42, b"new")
        with pytest.raises(XidMismatchError) as caught:
            state.commit(43)
        assert caught.value.xid == 43
        assert caught.value.prepared_xid == 42
        assert caught.value.fields()["prepared_xid"] == 42
        assert state.recover() == 42
    with ShadowStateFile.open(path) as state:
        assert state.read() == b"old"
        assert state.recover() == 42


def test_commit_or_rollback_with_nothing_prepared_is_an_error(tmp_path: Path) -> None:
    path = new_file(tmp_path)
    with ShadowStateFile.open(path) as state:
        with pytest.raises(XidMismatchError, match="no XID is prepared"):
            state.commit(1)
        with pytest.raises(XidMismatchError, match="no XID is prepared"):
            state.rollback(1)


def test_rollback_of_a_non_matching_xid_is_an_error(tmp_path: Path) -> None:
    path = new_file(tmp_path)
    with ShadowStateFile.open(path) as state:
        state.prepare(5, b"x")
        with pytest.raises(XidMismatchError, match="XID 5 is prepared"):
            state.rollback(6)
        assert state.recover() == 5


def test_prepare_while_another_xid_is_prepared_is_an_error(tmp_path: Path) -> None:
    path = new_file(tmp_path, b"old")
    with ShadowStateFile.open(path) as state:
        state.prepare(5, b"first")
        with pytest.raises(XidMismatchError, match="cannot prepare XID 6"):
            state.prepare(6, b"second")
        state.commit(5)
        assert state.read() == b"first"


def test_xid_zero_means_none_and_cannot_be_prepared(tmp_path: Path) -> None:
    with ShadowStateFile.open(new_file(tmp_path)) as state, pytest.raises(ValueError):
        state.prepare(0, b"x")


def test_a_payload_larger_than_a_page_is_a_typed_error(tmp_path: Path) -> None:
    path = new_file(tmp_path, b"old")
    with ShadowStateFile.open(path) as state:
        state.prepare(1, b"x" * state.capacity)  # exactly a page fits
        state.commit(1)
        with pytest.raises(StatePayloadTooLargeError) as caught:
            state.prepare(2, b"x" * (state.capacity + 1))
        assert caught.value.size == state.capacity + 1
        assert caught.value.capacity == state.capacity
        assert "larger page size" in caught.value.hint
        assert state.recover() is None
        assert state.read() == b"x" * state.capacity


def test_a_larger_page_size_holds_a_larger_payload(tmp_path: Path) -> None:
    path = new_file(tmp_path, b"", page_size=3 * REGION)
    big = bytes(range(256)) * 40
    committed_update(path, 1, big)
    with ShadowStateFile.open(path) as state:
        assert state.read() == big
    assert path.stat().st_size == REGION + 6 * REGION


def test_successive_updates_alternate_pages_and_keep_the_last_commit(tmp_path: Path) -> None:
    path = new_file(tmp_path, b"v0")
    for n in range(1, 8):
        committed_update(path, 100 + n, f"v{n}".encode() * n)
        with ShadowStateFile.open(path) as state:
            assert state.read() == f"v{n}".encode() * n
            assert state.sequence == n + 1
        committed = path.read_bytes()[10]
        assert committed == n % 2


def test_an_update_costs_three_fsyncs_and_a_rollback_one(tmp_path: Path) -> None:
    path = new_file(tmp_path)
    with ShadowStateFile.open(path) as state:
        before = FSYNC_COUNTS["shadow"]
        state.prepare(1, b"a")
        assert FSYNC_COUNTS["shadow"] - before == 2  # spare page, then header with the XID
        state.commit(1)
        assert FSYNC_COUNTS["shadow"] - before == 3
        state.prepare(2, b"b")
        state.rollback(2)
        assert FSYNC_COUNTS["shadow"] - before == 6


def test_a_read_only_open_refuses_writes_and_leaves_the_file_alone(tmp_path: Path) -> None:
    path = new_file(tmp_path)
    before = path.read_bytes()
    with ShadowStateFile.open(path, readonly=True) as state:
        with pytest.raises(StateFileError, match="read-only"):
            state.prepare(1, b"x")
        assert state.read() == b"initial"
    assert path.read_bytes() == before


def test_a_closed_file_refuses_writes(tmp_path: Path) -> None:
    state = ShadowStateFile.open(new_file(tmp_path))
    state.close()
    with pytest.raises(StateFileError, match="closed"):
        state.prepare(1, b"x")


# --- layout -------------------------------------------------------------------------------------


def test_the_bytes_follow_the_documented_layout(tmp_path: Path) -> None:
    path = new_file(tmp_path, b"old")
    with ShadowStateFile.open(path) as state:
        state.prepare(0x1122334455667788, b"payload")
    raw = path.read_bytes()
    magic, version, committed, reserved, page_size, xid = struct.unpack_from("<8sHBBIQ", raw)
    assert (magic, version, committed, reserved, page_size) == (b"BLKSHADW", 1, 0, 0, REGION)
    assert xid == 0x1122334455667788
    assert struct.unpack_from("<I", raw, 24)[0] == zlib.crc32(raw[:24])
    assert raw[HEADER_SIZE:REGION] == bytes(REGION - HEADER_SIZE)
    spare = raw[page_offset(1, REGION) :]
    sequence, page_xid, length = struct.unpack_from("<QQI", spare)
    assert (sequence, page_xid, length) == (2, 0x1122334455667788, 7)
    assert struct.unpack_from("<I", spare, 20)[0] == zlib.crc32(spare[:20] + b"payload")
    assert spare[24:31] == b"payload"
    assert spare[31:REGION] == bytes(REGION - 31)


# --- files that are not state files ---------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [b"", b"hello world\n", bytes(3 * REGION), b"\x17" * (3 * REGION), b"BLKSHADW" + bytes(100)],
    ids=["empty", "text", "zeros", "garbage", "magic-only"],
)
def test_a_foreign_file_is_a_typed_error_with_a_hint(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "foreign"
    path.write_bytes(content)
    with pytest.raises((NotAStateFileError, StateFileCorruptError)) as caught:
        ShadowStateFile.open(path)
    assert caught.value.file == str(path)
    assert caught.value.hint
    assert caught.value.exit_code == 74
    assert path.read_bytes() == content  # untouched


def test_a_foreign_file_without_the_magic_is_not_a_state_file(tmp_path: Path) -> None:
    path = tmp_path / "foreign"
    path.write_bytes(b"\x17" * (3 * REGION))
    with pytest.raises(NotAStateFileError, match="wrong magic"):
        ShadowStateFile.open(path)


def test_a_missing_file_is_a_file_access_error(tmp_path: Path) -> None:
    with pytest.raises(FileAccessError):
        ShadowStateFile.open(tmp_path / "missing")


def test_a_truncated_state_file_is_refused(tmp_path: Path) -> None:
    path = new_file(tmp_path)
    path.write_bytes(path.read_bytes()[: 2 * REGION])
    with pytest.raises(StateFileCorruptError, match=r"needs \d+"):
        ShadowStateFile.open(path)


def test_a_state_file_of_a_future_version_is_refused(tmp_path: Path) -> None:
    path = new_file(tmp_path)
    raw = bytearray(path.read_bytes())
    raw[8:10] = struct.pack("<H", 2)
    raw[24:28] = struct.pack("<I", zlib.crc32(bytes(raw[:24])))
    path.write_bytes(bytes(raw))
    with pytest.raises(NotAStateFileError, match="version 2"):
        ShadowStateFile.open(path)


# --- header damage: the torn-write fallback ------------------------------------------------------


def test_a_header_torn_during_prepare_reports_the_prepared_xid(tmp_path: Path) -> None:
    path = new_file(tmp_path, b"old")
    with ShadowStateFile.open(path) as state:
        state.prepare(9, b"new")
    tear_header(path)
    with ShadowStateFile.open(path) as state:
        assert state.header_recovered
        assert state.read() == b"old"  # the prepared page is not taken as committed
        assert state.recover() == 9
        state.rollback(9)  # the coordinator never decided to commit: roll back
    with ShadowStateFile.open(path) as state:
        assert not state.header_recovered  # the rollback rewrote the header
        assert (state.read(), state.recover()) == (b"old", None)


def test_a_header_torn_during_commit_is_finished_by_commit_by_xid(tmp_path: Path) -> None:
    path = new_file(tmp_path, b"old")
    committed_update(path, 1, b"one")
    with ShadowStateFile.open(path) as state:
        state.prepare(2, b"two")
    tear_header(path, keep=0)  # the flip to page 0 tore
    with ShadowStateFile.open(path) as state:
        assert (state.read(), state.recover()) == (b"one", 2)
        state.commit(2)
    with ShadowStateFile.open(path) as state:
        assert (state.read(), state.recover()) == (b"two", None)
        assert not state.header_recovered


def test_a_garbled_header_sector_with_valid_pages_is_still_recovered(tmp_path: Path) -> None:
    path = new_file(tmp_path, b"old")
    with ShadowStateFile.open(path) as state:
        state.prepare(3, b"new")
    raw = bytearray(path.read_bytes())
    raw[:512] = b"\xff" * 512  # the whole first sector garbled, magic included
    path.write_bytes(bytes(raw))
    with ShadowStateFile.open(path) as state:
        assert (state.read(), state.recover()) == (b"old", 3)


def test_header_damage_with_a_single_valid_page_is_corruption(tmp_path: Path) -> None:
    path = new_file(tmp_path, b"old")  # a new file has one valid page: no write was torn
    flip_byte(path, 12)
    with pytest.raises(StateFileCorruptError, match="header fails its CRC32"):
        ShadowStateFile.open(path)


def test_header_damage_with_both_pages_damaged_is_corruption(tmp_path: Path) -> None:
    path = new_file(tmp_path, b"old")
    committed_update(path, 1, b"new")
    flip_byte(path, 16)  # the XID field: the magic still says "state file"
    flip_byte(path, page_offset(0, REGION) + 2)
    flip_byte(path, page_offset(1, REGION) + 24)
    with pytest.raises(StateFileCorruptError):
        ShadowStateFile.open(path)


# --- page damage ---------------------------------------------------------------------------------


def test_damage_to_the_spare_page_is_harmless(tmp_path: Path) -> None:
    path = new_file(tmp_path, b"old")
    committed_update(path, 1, b"new")  # committed page 1; page 0 is spare
    flip_byte(path, page_offset(0, REGION) + 24)
    with ShadowStateFile.open(path) as state:
        assert (state.read(), state.recover()) == (b"new", None)
        state.prepare(2, b"newer")
        state.commit(2)
    with ShadowStateFile.open(path) as state:
        assert state.read() == b"newer"


def test_a_torn_spare_page_from_an_interrupted_prepare_is_ignored(tmp_path: Path) -> None:
    path = new_file(tmp_path, b"old")
    raw = bytearray(path.read_bytes())
    spare = page_offset(1, REGION)
    raw[spare : spare + 16] = struct.pack("<QQ", 2, 77)  # half a page header reached the disk
    path.write_bytes(bytes(raw))
    with ShadowStateFile.open(path) as state:
        assert (state.read(), state.recover()) == (b"old", None)


def test_damage_to_the_committed_page_is_an_error_never_older_data(tmp_path: Path) -> None:
    path = new_file(tmp_path, b"old")
    committed_update(path, 1, b"new")  # page 0 still holds the valid, older b"old"
    offset = page_offset(1, REGION)
    flip_byte(path, offset + 25)
    with pytest.raises(StateFileCorruptError, match="committed page 1") as caught:
        ShadowStateFile.open(path)
    assert caught.value.offset == offset
    assert caught.value.file == str(path)
    assert "backup" in caught.value.hint


def test_a_damaged_prepared_page_can_be_rolled_back_but_not_committed(tmp_path: Path) -> None:
    path = new_file(tmp_path, b"old")
    with ShadowStateFile.open(path) as state:
        state.prepare(4, b"new")
    flip_byte(path, page_offset(1, REGION) + 24)
    with ShadowStateFile.open(path) as state:
        assert (state.read(), state.recover()) == (b"old", 4)
        with pytest.raises(StateFileCorruptError, match="cannot be committed"):
            state.commit(4)
        state.rollback(4)
        assert (state.read(), state.recover()) == (b"old", None)
