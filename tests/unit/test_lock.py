"""State folder lock: one holder, named in the lock file; others refuse, naming it."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from binlake.errors import FileAccessError, StateLockedError
from binlake.storage.lock import LockHolder, StateLock, read_holder


def test_the_lock_file_names_the_holding_process(tmp_path: Path) -> None:
    with StateLock.acquire(tmp_path) as lock:
        content = json.loads((tmp_path / "lock").read_text())
        assert content["pid"] == os.getpid()
        assert content["hostname"] == socket.gethostname()
        assert content["started"].endswith("+00:00")
        assert "pytest" in content["command"] or "python" in content["command"]
        assert read_holder(tmp_path) == lock.holder


def test_a_second_acquire_refuses_naming_the_holder(tmp_path: Path) -> None:
    with StateLock.acquire(tmp_path), pytest.raises(StateLockedError) as caught:
        StateLock.acquire(tmp_path)  # another open file: flock conflicts in one process too
    error = caught.value
    assert error.holder_pid == os.getpid()
    assert f"binlake process {os.getpid()}" in str(error)
    assert error.holder_hostname == socket.gethostname()
    assert f"stop process {os.getpid()}" in error.hint
    assert error.fields()["holder_pid"] == os.getpid()
    assert error.file == str(tmp_path / "lock")
    assert error.exit_code == 75


def test_a_refused_acquire_leaves_the_holders_details_intact(tmp_path: Path) -> None:
    with StateLock.acquire(tmp_path) as lock:
        before = (tmp_path / "lock").read_bytes()
        with pytest.raises(StateLockedError):
            StateLock.acquire(tmp_path)
        assert (tmp_path / "lock").read_bytes() == before
        assert lock.held


def test_release_empties_the_file_and_lets_the_next_holder_in(tmp_path: Path) -> None:
    lock = StateLock.acquire(tmp_path)
    lock.release()
    assert not lock.held
    assert (tmp_path / "lock").read_bytes() == b""
    lock.release()  # twice is harmless
    with StateLock.acquire(tmp_path) as again:
        assert again.held


def test_details_left_by_a_dead_holder_do_not_block(tmp_path: Path) -> None:
    stale = LockHolder(
        pid=999999, hostname="elsewhere", started="2020-01-01T00:00:00+00:00", command="binlake run"
    )
    (tmp_path / "lock").write_bytes(stale.encode())
    with StateLock.acquire(tmp_path) as lock:
        assert read_holder(tmp_path) == lock.holder
        assert lock.holder.pid == os.getpid()


def test_a_holder_that_has_not_named_itself_still_refuses_others(tmp_path: Path) -> None:
    with StateLock.acquire(tmp_path):
        (tmp_path / "lock").write_bytes(b"")  # as if caught between flock and the write
        with pytest.raises(StateLockedError, match="has not named itself") as caught:
            StateLock.acquire(tmp_path)
    assert caught.value.holder_pid is None


def test_a_missing_state_folder_is_a_file_access_error(tmp_path: Path) -> None:
    with pytest.raises(FileAccessError):
        StateLock.acquire(tmp_path / "missing")


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"{",
        b"[]",
        b'{"pid": "1"}',
        b'{"pid": true, "hostname": "h", "started": "s", "command": "c"}',
        b"\xff",
    ],
)
def test_unreadable_holder_details_decode_to_none(raw: bytes) -> None:
    assert LockHolder.decode(raw) is None


def test_holder_details_round_trip() -> None:
    holder = LockHolder.current()
    assert LockHolder.decode(holder.encode()) == holder
