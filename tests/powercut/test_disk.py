"""The power-cut model without FUSE: ``PowerCutDisk`` driven directly over a temporary folder,
one rule a test (binlake_dev.powercut.disk's module doc): unsynced data reverted, fsynced data
kept, entries undone unless their directory was fsynced, and torn tails on a boundary."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from binlake_dev.powercut.disk import PowerCutDisk

W = os.O_WRONLY


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[PowerCutDisk]:
    (tmp_path / "root").mkdir()
    yield PowerCutDisk(str(tmp_path / "root"), str(tmp_path / "graves"))


def put(disk: PowerCutDisk, path: str, data: bytes) -> None:
    """A durable file holding ``data`` (content, name and directory all fsynced)."""
    fh = disk.create(path, W, 0o644)
    disk.write(fh, data, 0)
    disk.fsync(fh)
    disk.release(fh)
    disk.fsyncdir(os.path.dirname(path))


def append(disk: PowerCutDisk, path: str, data: bytes, *, fsync: bool = False) -> None:
    fh = disk.open(path, W | os.O_APPEND)
    disk.write(fh, data, os.path.getsize(disk.backing(path)))  # the kernel's offset: the end
    if fsync:
        disk.fsync(fh)
    disk.release(fh)


def content(disk: PowerCutDisk, path: str) -> bytes:
    return Path(disk.backing(path)).read_bytes()


def names(disk: PowerCutDisk, path: str = "/") -> list[str]:
    return sorted(os.listdir(disk.backing(path)))


def test_an_unsynced_append_is_lost(disk: PowerCutDisk) -> None:
    put(disk, "/log", b"synced")
    append(disk, "/log", b" not synced")
    report = disk.cut()
    assert content(disk, "/log") == b"synced"
    assert report.files_reverted == ["/log"]
    assert report.bytes_dropped == len(b" not synced")


def test_an_fsynced_append_is_kept(disk: PowerCutDisk) -> None:
    put(disk, "/log", b"synced")
    append(disk, "/log", b" and this", fsync=True)
    assert disk.cut().files_reverted == []
    assert content(disk, "/log") == b"synced and this"


def test_overwritten_durable_bytes_are_put_back(disk: PowerCutDisk) -> None:
    put(disk, "/page", b"0123456789")
    fh = disk.open("/page", os.O_RDWR)
    disk.write(fh, b"abc", 2)
    disk.write(fh, b"XYZW", 4)  # overlaps the kept range: each durable byte is kept once
    disk.write(fh, b"tail", 10)
    assert content(disk, "/page") == b"01abXYZW89tail"
    report = disk.cut()
    assert content(disk, "/page") == b"0123456789"
    assert report.bytes_restored == 6


def test_a_truncation_is_undone(disk: PowerCutDisk) -> None:
    put(disk, "/file", b"0123456789")
    disk.truncate("/file", 3)
    fh = disk.open("/file", os.O_RDWR)
    disk.truncate(None, 20, fh)  # ftruncate: grows with zeros
    disk.cut()
    assert content(disk, "/file") == b"0123456789"


def test_open_with_o_trunc_is_undone(disk: PowerCutDisk) -> None:
    put(disk, "/file", b"old content")
    fh = disk.open("/file", W | os.O_TRUNC)
    disk.write(fh, b"new", 0)
    assert content(disk, "/file") == b"new"
    disk.cut()
    assert content(disk, "/file") == b"old content"


def test_a_created_file_whose_directory_was_not_fsynced_disappears(disk: PowerCutDisk) -> None:
    fh = disk.create("/new", W, 0o644)
    disk.write(fh, b"data", 0)
    disk.fsync(fh)  # its data is durable, its name is not
    report = disk.cut()
    assert names(disk) == []
    assert report.entries_undone == 1


def test_a_created_file_whose_data_was_not_fsynced_is_empty(disk: PowerCutDisk) -> None:
    fh = disk.create("/new", W, 0o644)
    disk.write(fh, b"data", 0)
    disk.fsyncdir("/")  # its name is durable, its data is not
    disk.cut()
    assert content(disk, "/new") == b""


def test_a_rename_over_a_file_is_undone_without_a_directory_fsync(disk: PowerCutDisk) -> None:
    put(disk, "/state", b"old state")
    put(disk, "/state.tmp", b"new state")
    disk.rename("/state.tmp", "/state")
    assert names(disk) == ["state"]
    disk.cut()
    assert names(disk) == ["state", "state.tmp"]
    assert content(disk, "/state") == b"old state"
    assert content(disk, "/state.tmp") == b"new state"


def test_a_rename_is_kept_once_its_directory_is_fsynced(disk: PowerCutDisk) -> None:
    put(disk, "/state", b"old state")
    put(disk, "/state.tmp", b"new state")
    disk.rename("/state.tmp", "/state")
    disk.fsyncdir("/")
    disk.cut()
    assert names(disk) == ["state"]
    assert content(disk, "/state") == b"new state"


def test_an_unlink_is_undone_with_the_file_content(disk: PowerCutDisk) -> None:
    put(disk, "/relay.000001", b"events")
    disk.unlink("/relay.000001")
    assert names(disk) == []
    disk.cut()
    assert content(disk, "/relay.000001") == b"events"


def test_an_unlinked_file_is_deleted_for_good_once_its_directory_is_fsynced(
    disk: PowerCutDisk, tmp_path: Path
) -> None:
    put(disk, "/relay.000001", b"events")
    disk.unlink("/relay.000001")
    assert len(os.listdir(tmp_path / "graves")) == 1
    disk.fsyncdir("/")
    assert os.listdir(tmp_path / "graves") == []
    disk.cut()
    assert names(disk) == []


def test_an_undone_mkdir_takes_its_synced_content_with_it(disk: PowerCutDisk) -> None:
    disk.mkdir("/warehouse", 0o755)
    put(disk, "/warehouse/data.parquet", b"rows")  # fsynced, and so is its directory
    disk.cut()
    assert names(disk) == []


def test_a_special_file_is_an_entry_like_any_other(disk: PowerCutDisk) -> None:
    disk.mknod("/fifo", stat.S_IFIFO | 0o600, 0)
    assert names(disk) == ["fifo"]
    disk.cut()
    assert names(disk) == []


def test_an_rmdir_is_undone(disk: PowerCutDisk) -> None:
    disk.mkdir("/empty", 0o755)
    disk.fsyncdir("/")
    disk.rmdir("/empty")
    disk.cut()
    assert names(disk) == ["empty"]


def test_entries_are_undone_where_a_renamed_directory_is_now(disk: PowerCutDisk) -> None:
    disk.mkdir("/a", 0o755)
    disk.fsyncdir("/")
    put(disk, "/a/kept", b"k")
    fh = disk.create("/a/lost", W, 0o644)
    disk.release(fh)
    disk.rename("/a", "/b")
    disk.fsyncdir("/")  # the directory's rename is durable, its new entry is not
    disk.cut()
    assert names(disk) == ["b"]
    assert names(disk, "/b") == ["kept"]


def test_a_rename_across_directories_needs_both_fsynced(disk: PowerCutDisk) -> None:
    for folder in ("/from", "/to"):
        disk.mkdir(folder, 0o755)
    disk.fsyncdir("/")
    put(disk, "/from/file", b"f")
    disk.rename("/from/file", "/to/file")
    disk.fsyncdir("/to")
    disk.cut()
    assert (names(disk, "/from"), names(disk, "/to")) == (["file"], [])


def test_rename_checks_what_it_replaces(disk: PowerCutDisk) -> None:
    disk.mkdir("/dir", 0o755)
    put(disk, "/dir/inside", b"x")
    put(disk, "/file", b"y")
    with pytest.raises(IsADirectoryError):
        disk.rename("/file", "/dir")
    with pytest.raises(NotADirectoryError):
        disk.rename("/dir", "/file")
    disk.mkdir("/other", 0o755)
    with pytest.raises(OSError, match="not empty"):
        disk.rename("/other", "/dir")
    with pytest.raises(FileExistsError):
        disk.rename("/file", "/dir/inside", 1)  # RENAME_NOREPLACE
    assert names(disk) == ["dir", "file", "other"]


@pytest.mark.parametrize("tear", [512, 4096])
def test_a_torn_tail_keeps_a_prefix_of_the_newest_write_ending_on_the_boundary(
    disk: PowerCutDisk, tear: int
) -> None:
    put(disk, "/log", b"s" * 100)
    kept = set()
    for seed in range(40):
        fh = disk.open("/log", W)
        disk.truncate(None, 100, fh)
        disk.fsync(fh)
        disk.write(fh, b"a" * 3996, 100)  # one write(2) split at a page: the requests join up
        disk.write(fh, b"b" * 6000, 4096)
        report = disk.cut(tear=tear, seed=seed)
        disk.release(fh)
        data = content(disk, "/log")
        assert report.torn is not None and report.torn.offset == 100
        assert len(data) % tear == 0 and 100 < len(data) < 10096
        assert data == (b"s" * 100 + b"a" * 3996 + b"b" * 6000)[: len(data)]
        kept.add(len(data))
    assert len(kept) > 1  # the boundary is chosen at random


def test_a_write_within_one_block_tears_to_nothing(disk: PowerCutDisk) -> None:
    put(disk, "/log", b"s" * 100)
    append(disk, "/log", b"t" * 300)
    report = disk.cut(tear=512, seed=0)
    assert report.torn is None
    assert content(disk, "/log") == b"s" * 100


def test_an_o_sync_write_is_durable_at_once(disk: PowerCutDisk) -> None:
    put(disk, "/log", b"a")
    fh = disk.open("/log", W | os.O_APPEND | os.O_SYNC)
    disk.write(fh, b"b", 1)
    disk.cut()
    assert content(disk, "/log") == b"ab"


def test_stats_count_what_a_cut_would_take(disk: PowerCutDisk) -> None:
    put(disk, "/a", b"0123")
    fh = disk.open("/a", os.O_RDWR)
    disk.write(fh, b"xy", 2)
    disk.write(fh, b"appended", 4)
    disk.mkdir("/d", 0o755)
    stats = disk.stats()
    assert (stats.files_unsynced, stats.bytes_held, stats.bytes_unsynced) == (1, 2, 8)
    assert (stats.entries_unsynced, stats.dirs_unsynced) == (1, 1)


def test_sync_all_makes_everything_durable(disk: PowerCutDisk) -> None:
    put(disk, "/a", b"1")
    append(disk, "/a", b"2")
    disk.unlink("/a")
    disk.mkdir("/d", 0o755)
    disk.sync_all()
    assert disk.cut().files_reverted == []
    assert names(disk) == ["d"]
