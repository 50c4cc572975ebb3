"""The expiry lock: an expiry holds it, cut recording tries it, across the threads of a
process and across the processes of a state folder."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from binlake.errors import FileAccessError
from binlake.storage.expiry_lock import EXPIRY_LOCK_FILE_NAME, ExpiryLock
from expiry_holder import let_go, start_expiry_holder


def test_a_try_is_refused_while_another_process_holds_the_expiry_lock(tmp_path: Path) -> None:
    holder = start_expiry_holder(tmp_path)
    lock = ExpiryLock(tmp_path)
    try:
        assert not lock.acquire(blocking=False)
    finally:
        let_go(holder)
    assert lock.acquire(blocking=False)  # the refusal left its thread lock free
    lock.release()


def test_a_wait_ends_when_the_other_process_lets_go(tmp_path: Path) -> None:
    holder = start_expiry_holder(tmp_path)
    lock = ExpiryLock(tmp_path)
    acquired = threading.Event()

    def wait_for_it() -> None:
        with lock:
            acquired.set()

    waiter = threading.Thread(target=wait_for_it)
    waiter.start()
    time.sleep(0.3)
    assert not acquired.is_set(), "the wait did not wait for the other process"
    let_go(holder)
    waiter.join(timeout=30)
    assert acquired.is_set()


def test_a_holder_killed_by_sigkill_leaves_no_stale_expiry_lock(tmp_path: Path) -> None:
    holder = start_expiry_holder(tmp_path)
    lock = ExpiryLock(tmp_path)
    assert not lock.acquire(blocking=False)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=30)
    assert lock.acquire(blocking=False)
    lock.release()
    assert (tmp_path / EXPIRY_LOCK_FILE_NAME).exists()  # left in place, like the state lock


def test_the_threads_of_one_process_share_one_expiry_lock(tmp_path: Path) -> None:
    lock = ExpiryLock(tmp_path)
    tries: list[bool] = []
    with lock:
        other = threading.Thread(target=lambda: tries.append(lock.acquire(blocking=False)))
        other.start()
        other.join()
    assert tries == [False]
    assert lock.acquire(blocking=False)
    lock.release()


def test_two_expiry_locks_of_one_folder_conflict_as_two_processes_would(tmp_path: Path) -> None:
    first, second = ExpiryLock(tmp_path), ExpiryLock(tmp_path)
    with first:
        assert not second.acquire(blocking=False)
    assert second.acquire(blocking=False)
    second.release()


def test_without_a_state_folder_here_the_expiry_lock_is_the_threads_only(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "on-another-host"
    lock = ExpiryLock(missing)
    assert lock.path is None
    with lock:
        assert not lock.acquire(blocking=False)
        other = ExpiryLock(missing)  # nothing shared between two instances
        assert other.acquire(blocking=False)
        other.release()
    assert not missing.exists()  # the lock made no folder


def test_a_state_folder_made_after_the_lock_is_used_once_it_exists(tmp_path: Path) -> None:
    state = tmp_path / "state"
    lock = ExpiryLock(state)
    assert lock.path is None
    state.mkdir()
    assert lock.path == state / EXPIRY_LOCK_FILE_NAME
    with lock:
        assert not ExpiryLock(state).acquire(blocking=False)


def test_a_lock_file_that_cannot_be_opened_is_a_file_access_error(tmp_path: Path) -> None:
    (tmp_path / EXPIRY_LOCK_FILE_NAME).mkdir()  # a folder where the lock file goes
    lock = ExpiryLock(tmp_path)
    with pytest.raises(FileAccessError) as caught:
        lock.acquire(blocking=False)
    assert caught.value.file == str(tmp_path / EXPIRY_LOCK_FILE_NAME)
    assert "expiry lock" in str(caught.value) and caught.value.hint
    (tmp_path / EXPIRY_LOCK_FILE_NAME).rmdir()
    assert lock.acquire(blocking=False)  # the failure left its thread lock free
    lock.release()
