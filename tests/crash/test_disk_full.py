"""Disk full while writing the relay log: a typed error, nothing synced lost, resume afterwards.

Two real ways to run out of space, no mocking:

- a 256 KiB tmpfs mounted for the test (ENOSPC); needs mount permission (root here). Where mounting
  is not permitted the case is skipped with the reason, and the next one still runs;
- RLIMIT_FSIZE set in the writer process (writes past it fail with EFBIG, which durable.py maps
  to DiskFullError too).

Each run: the driver writes until the disk is full and must exit 74 with "disk full" or "file size
limit" on stderr; recovery then leaves whole files holding every transaction the driver saw
synced; once space is back, a restarted driver finishes the stream with nothing lost or doubled.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from driver_runs import DriverRun, assert_nothing_synced_lost, run_driver

from binlake.errors import DiskFullError, RelayLogStateError
from binlake.relay.writer import RelayLogWriter
from binlake.storage.recovery import recover_log
from relay_testing import check_recovered_log, gtid_seqs, source_log, split_events

EXIT_STORAGE = DiskFullError.exit_code


def mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    return proc.returncode == 0


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / "tmpfs"
    if not mount_tmpfs(where, "256k"):
        pytest.skip("mounting a tmpfs is not permitted here; the RLIMIT_FSIZE case covers it")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def grow(disk: Path, size: str) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(disk)], check=True)


def assert_stopped_by_full_disk(run: DriverRun, words: str) -> None:
    assert run.returncode == EXIT_STORAGE, run.describe()
    assert words in run.stderr and "hint: " in run.stderr, run.describe()
    assert "Traceback" not in run.stderr
    assert run.synced, "the disk filled before any sync: the case tests too little"


def finish_after_space_returns(folder: Path, transactions: int, *args: str) -> None:
    again = run_driver(folder, "--resume", "--transactions", str(transactions), *args)
    assert again.returncode == 0, again.describe()
    check_recovered_log(folder)
    seqs = gtid_seqs(folder)
    assert seqs == list(range(seqs[0], transactions + 1)), "a transaction lost or doubled"


@pytest.mark.parametrize("max_file_size", [8 << 20, 12_000], ids=["one-file", "rotating"])
def test_full_tmpfs_stops_the_writer_with_disk_full_and_loses_nothing_synced(
    small_disk: Path, max_file_size: int
) -> None:
    folder = small_disk / "relay"
    args = [
        "--transactions",
        "400",
        "--statements",
        "20",
        "--sync-every",
        "7",
        "--purge-every",
        "0",
        "--max-file-size",
        str(max_file_size),
    ]
    run = run_driver(folder, *args)
    assert_stopped_by_full_disk(run, "disk full")
    recover_log(folder)  # on the still-full disk: trimming frees, never needs, space
    check_recovered_log(folder)
    assert_nothing_synced_lost(folder, run)
    grow(small_disk, "2m")
    finish_after_space_returns(folder, 400, *args[2:])


def test_file_size_limit_stops_the_writer_with_disk_full_and_loses_nothing_synced(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "relay"
    args = [
        "--transactions",
        "400",
        "--sync-every",
        "7",
        "--purge-every",
        "0",
        "--max-file-size",
        str(8 << 20),
    ]
    run = run_driver(folder, *args, "--fsize-limit", "30000")
    assert_stopped_by_full_disk(run, "file size limit")
    assert (folder / "relay-bin.000001").stat().st_size <= 30000
    recover_log(folder)
    check_recovered_log(folder)
    assert_nothing_synced_lost(folder, run)
    finish_after_space_returns(folder, 400, *args[2:])


def fill(disk: Path, leave_pages: int) -> Path:
    """Fill ``disk`` to its last 4 KiB page, then free ``leave_pages`` pages again."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, bytes(4096))
    except OSError:
        pass
    os.ftruncate(fd, os.fstat(fd).st_size // 4096 * 4096 - leave_pages * 4096)
    os.close(fd)
    return filler


@pytest.mark.parametrize(
    ("leave_pages", "failing_step"),
    [(0, "relay-bin.index.marker"), (1, "relay log file header")],
    ids=["marker-write", "new-file-header"],
)
def test_full_disk_during_rotation_is_typed_and_recoverable(
    small_disk: Path, leave_pages: int, failing_step: str
) -> None:
    folder = small_disk / "relay"
    events = split_events(source_log(5))
    writer = RelayLogWriter.open(folder)
    for event in events:
        writer.append(event)
    synced = writer.sync()
    filler = fill(small_disk, leave_pages)
    with pytest.raises(DiskFullError, match=failing_step.split()[-1]) as info:
        writer.rotate()
    assert failing_step in str(info.value)
    assert writer.failed is info.value
    with pytest.raises(RelayLogStateError):
        writer.append(events[0])
    writer.close()
    recover_log(folder)  # still full: repair only deletes and truncates
    check_recovered_log(folder)
    assert gtid_seqs(folder) == [1, 2, 3, 4, 5]
    assert (folder / synced.file).stat().st_size == synced.offset
    filler.unlink()
