"""The power-cut file system through a real FUSE mount: each rule of the model seen by ordinary
file calls (an unsynced append lost, an fsynced one kept, a rename undone without a directory
fsync, a torn tail on a boundary ...), no stale page after the cut, SQLite in WAL mode and
binlake's state lock working through the mount, and the mount's own upkeep (dark after a cut,
a dead mount of a crashed run cleaned up).

One mount serves the module; each test works in a folder of its own, made durable first."""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import mmap
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from binlake.errors import StateLockedError
from binlake.storage.lock import StateLock
from binlake_dev.powercut import PowerCutMount, unavailable_reason
from binlake_dev.powercut.mount import mounted

UNAVAILABLE = unavailable_reason()
pytestmark = pytest.mark.skipif(
    UNAVAILABLE is not None, reason=f"the power-cut file system cannot run here: {UNAVAILABLE}"
)
_folders = itertools.count()


@pytest.fixture(scope="module")
def fs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PowerCutMount]:
    base = tmp_path_factory.mktemp("powercut")
    (base / "backing").mkdir()
    with PowerCutMount(base / "backing", base / "mnt") as mount:
        yield mount
    assert not mounted(mount.mount)


@pytest.fixture
def folder(fs: PowerCutMount) -> Path:
    """A new folder under the mount, durable (as after a test's setup)."""
    path = fs.mount / f"t{next(_folders)}"
    path.mkdir()
    fs.sync_all()
    return path


def write(path: Path, data: bytes, *, sync: bool = True, flags: int = os.O_TRUNC) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | flags, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def test_an_unsynced_append_is_lost(fs: PowerCutMount, folder: Path) -> None:
    write(folder / "relay", b"synced")
    fs.sync_all()
    write(folder / "relay", b" unsynced", sync=False, flags=os.O_APPEND)
    assert (folder / "relay").read_bytes() == b"synced unsynced"
    report = fs.power_cut()
    assert (folder / "relay").read_bytes() == b"synced"
    assert report.bytes_dropped == len(b" unsynced")


def test_an_fsynced_append_is_kept(fs: PowerCutMount, folder: Path) -> None:
    write(folder / "relay", b"synced")
    fs.sync_all()
    write(folder / "relay", b" and this", flags=os.O_APPEND)
    fs.power_cut()
    assert (folder / "relay").read_bytes() == b"synced and this"


def test_a_new_file_fsynced_without_its_directory_is_gone(fs: PowerCutMount, folder: Path) -> None:
    write(folder / "new", b"data")  # the file is fsynced, its folder is not
    assert fs.stats().entries_unsynced == 1
    fs.power_cut()
    assert list(folder.iterdir()) == []


def test_a_replace_without_a_directory_fsync_is_undone(fs: PowerCutMount, folder: Path) -> None:
    write(folder / "state", b"old")
    fs.sync_all()
    write(folder / "state.tmp", b"new")
    os.replace(folder / "state.tmp", folder / "state")
    fs.power_cut()
    assert (folder / "state").read_bytes() == b"old"
    assert sorted(p.name for p in folder.iterdir()) == ["state"]  # state.tmp was never durable


def test_a_replace_with_a_directory_fsync_is_kept(fs: PowerCutMount, folder: Path) -> None:
    write(folder / "state", b"old")
    fs.sync_all()
    write(folder / "state.tmp", b"new")
    os.replace(folder / "state.tmp", folder / "state")
    sync_dir(folder)
    fs.power_cut()
    assert (folder / "state").read_bytes() == b"new"
    assert sorted(p.name for p in folder.iterdir()) == ["state"]


def test_an_unlink_is_undone(fs: PowerCutMount, folder: Path) -> None:
    write(folder / "relay.000001", b"events")
    fs.sync_all()
    (folder / "relay.000001").unlink()
    fs.power_cut()
    assert (folder / "relay.000001").read_bytes() == b"events"


@pytest.mark.parametrize("tear", [512, 4096])
def test_a_torn_tail_keeps_a_prefix_of_the_last_write_ending_on_the_boundary(
    fs: PowerCutMount, folder: Path, tear: int
) -> None:
    head = b"h" * 1000
    write(folder / "relay", head)
    fs.sync_all()
    tail = bytes(range(256)) * 40  # one write(2) of 10240 bytes, unsynced
    write(folder / "relay", tail, sync=False, flags=os.O_APPEND)
    report = fs.power_cut(tear=tear, seed=7)
    data = (folder / "relay").read_bytes()
    assert report.torn is not None and report.torn.offset == len(head)
    assert len(data) % tear == 0 and len(head) < len(data) < len(head) + len(tail)
    assert data == (head + tail)[: len(data)]


def test_a_truncate_is_undone(fs: PowerCutMount, folder: Path) -> None:
    write(folder / "wal", b"0123456789" * 100)
    fs.sync_all()
    os.truncate(folder / "wal", 10)
    with open(folder / "wal", "r+b") as wal:
        wal.write(b"overwrite")
    fs.power_cut()
    assert (folder / "wal").read_bytes() == b"0123456789" * 100


def test_reads_after_the_cut_see_the_reverted_bytes(fs: PowerCutMount, folder: Path) -> None:
    write(folder / "page", b"a" * 8192)
    fs.sync_all()
    with open(folder / "page", "r+b") as page:
        page.write(b"b" * 8192)
        page.flush()
        page.seek(0)
        assert page.read() == b"b" * 8192  # now in the kernel's page cache
        with mmap.mmap(page.fileno(), 8192) as mapped:
            assert mapped[:4] == b"bbbb"
    fs.power_cut()
    assert (folder / "page").read_bytes() == b"a" * 8192
    with open(folder / "page", "rb") as page, mmap.mmap(page.fileno(), 0, prot=mmap.PROT_READ) as m:
        assert m[:] == b"a" * 8192


SQLITE_WORKLOAD = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("pragma synchronous=full")
db.execute("pragma cache_size=8")  # the open transaction spills its pages into the WAL
for i in range(20):
    db.execute("begin")
    db.execute("insert into t values (?, ?)", (i, "committed" * 20))
    db.execute("commit")
db.execute("begin")
for i in range(1000, 3000):
    db.execute("insert into t values (?, ?)", (i, "open" * 200))
print("ready", flush=True)
time.sleep(600)
"""


def test_sqlite_in_wal_mode_keeps_committed_transactions_and_drops_the_open_one(
    fs: PowerCutMount, folder: Path
) -> None:
    path = folder / "catalog.db"
    with sqlite3.connect(path) as db:
        db.execute("pragma journal_mode=wal")
        db.execute("create table t (id integer primary key, v text)")
    db.close()
    fs.sync_all()
    workload = subprocess.Popen(
        [sys.executable, "-c", SQLITE_WORKLOAD, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert workload.stdout is not None and workload.stdout.readline() == "ready\n"
        assert fs.stats().bytes_unsynced > 0  # the open transaction's frames, not synced
    finally:
        workload.send_signal(signal.SIGKILL)  # the crash point
        workload.wait()
    report = fs.power_cut()
    assert "/" + str((folder / "catalog.db-wal").relative_to(fs.mount)) in report.files_reverted
    with sqlite3.connect(path) as db:
        assert db.execute("pragma integrity_check").fetchone() == ("ok",)
        assert db.execute("pragma journal_mode").fetchone() == ("wal",)
        assert db.execute("select count(*), max(id) from t").fetchone() == (20, 19)
    db.close()


LOCKF_PROBE = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except OSError:
    print("held elsewhere")
else:
    print("got it")
"""


def test_flock_and_fcntl_locks_work_through_the_mount(folder: Path) -> None:
    with StateLock.acquire(folder), pytest.raises(StateLockedError):
        StateLock.acquire(folder)  # flock: a second open file description is refused
    StateLock.acquire(folder).release()
    write(folder / "db", b"")
    with open(folder / "db", "r+b") as held:
        fcntl.lockf(held, fcntl.LOCK_EX)
        probe = [sys.executable, "-c", LOCKF_PROBE, str(folder / "db")]
        assert subprocess.run(probe, capture_output=True, text=True).stdout == "held elsewhere\n"
        fcntl.lockf(held, fcntl.LOCK_UN)
        assert subprocess.run(probe, capture_output=True, text=True).stdout == "got it\n"


def test_appends_land_at_the_end_whoever_grew_the_file(folder: Path) -> None:
    with open(folder / "log", "ab", buffering=0) as log, open(folder / "log", "r+b") as other:
        log.write(b"a")
        other.seek(1)
        other.write(b"bb")
        other.flush()
        log.write(b"c")
    assert (folder / "log").read_bytes() == b"abbc"


def test_times_are_set_as_asked(folder: Path) -> None:
    write(folder / "file", b"x")
    os.utime(folder / "file", ns=(1_000_000_000, 2_000_000_000))
    assert os.stat(folder / "file").st_mtime_ns == 2_000_000_000
    subprocess.run(["touch", "-m", str(folder / "file")], check=True)  # UTIME_OMIT, UTIME_NOW
    found = os.stat(folder / "file")
    assert found.st_atime_ns == 1_000_000_000 and found.st_mtime_ns > 2_000_000_000


def test_a_unix_socket_binds_and_connects_on_the_mount(folder: Path) -> None:
    with socket.socket(socket.AF_UNIX) as server, socket.socket(socket.AF_UNIX) as client:
        server.bind(str(folder / "server.sock"))  # mknod of a socket node (mariadbd's socket)
        server.listen(1)
        client.connect(str(folder / "server.sock"))
        with server.accept()[0] as accepted:
            client.sendall(b"ping")
            assert accepted.recv(4) == b"ping"


def test_statvfs_reports_the_backing_file_system(fs: PowerCutMount) -> None:
    mounted_fs, backing_fs = os.statvfs(fs.mount), os.statvfs(fs.backing)
    assert (mounted_fs.f_blocks, mounted_fs.f_frsize) == (backing_fs.f_blocks, backing_fs.f_frsize)
    assert mounted_fs.f_bavail > 0


def test_the_mount_is_dark_between_the_cut_and_the_remount(fs: PowerCutMount, folder: Path) -> None:
    fs.cut()
    try:
        with pytest.raises(OSError) as dark:
            write(folder / "after", b"x")
        assert dark.value.errno == 5  # EIO: the power is off
    finally:
        fs.remount()
    write(folder / "after", b"x")


def test_a_remount_with_a_file_still_open_detaches_the_old_mount(
    fs: PowerCutMount, folder: Path
) -> None:
    write(folder / "held", b"durable")
    fs.sync_all()
    held = os.open(folder / "held", os.O_RDWR)
    os.write(held, b"lost")
    started = time.monotonic()
    fs.power_cut()  # the old mount is busy: unmounted lazily, its daemon stopped
    assert time.monotonic() - started < 3.0
    with pytest.raises(OSError):
        os.pread(held, 4, 0)
    with contextlib.suppress(OSError):  # the old mount's daemon is gone: ENOTCONN
        os.close(held)
    assert (folder / "held").read_bytes() == b"durable"


def test_a_dead_mount_left_by_a_crashed_run_is_cleaned_up(tmp_path: Path) -> None:
    (tmp_path / "backing").mkdir()
    crashed = PowerCutMount(tmp_path / "backing", tmp_path / "mnt")
    crashed.start()
    assert crashed.pid is not None
    os.kill(crashed.pid, signal.SIGKILL)  # the mount stays, dead
    assert mounted(crashed.mount)
    with PowerCutMount(tmp_path / "backing", tmp_path / "mnt") as fresh:
        write(fresh.mount / "file", b"works")
        assert (tmp_path / "backing" / "file").read_bytes() == b"works"
    assert not mounted(fresh.mount)
