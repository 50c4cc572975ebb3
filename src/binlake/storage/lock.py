"""One process per state folder: an advisory ``flock`` on ``<state>/lock``.

The lock is the kernel's ``flock`` on the open file, taken without waiting; the file's content
only names the holder (one JSON line: pid, hostname, start time, command line) so that a second
process can say who is in the way. The content is written after the lock is taken and is not
fsynced: it is information, not state. The kernel releases the lock when the holder's file is
closed or the process ends in any way, kill -9 included, so a lock is never stale; the content
a dead holder left is overwritten by the next holder. ``release`` empties the file before
unlocking. The file itself is never deleted: deleting a locked file lets a third process lock a
new file of the same name while the second still holds the old one.

The descriptor is not inherited by programs the holder starts (O_CLOEXEC); a child made by a
bare ``fork`` shares the lock until it exits. ``flock`` is local: the state folder must be on a
local file system.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shlex
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from binlake.errors import StateLockedError
from binlake.storage.durable import make_folder, raise_os_error

LOCK_FILE_NAME = "lock"
#: How long a refused process waits for the holder to finish writing its details.
_DETAILS_WAIT_S = 0.2
_MAX_DETAILS = 64 * 1024


@dataclass(frozen=True)
class LockHolder:
    """Who holds the lock: written into the lock file by the holder."""

    pid: int
    hostname: str
    #: When the holder took the lock, ISO 8601 UTC (close to when it started).
    started: str
    command: str

    @classmethod
    def current(cls) -> LockHolder:
        started = datetime.now(UTC).isoformat(timespec="seconds")
        return cls(os.getpid(), socket.gethostname(), started, shlex.join(sys.orig_argv))

    def encode(self) -> bytes:
        return (json.dumps(asdict(self), sort_keys=True) + "\n").encode()

    @classmethod
    def decode(cls, raw: bytes) -> LockHolder | None:
        """The holder a lock file names, or None when it is empty or unreadable."""
        try:
            fields: Any = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return None
        if not isinstance(fields, dict):
            return None
        pid = fields.get("pid")
        texts = [fields.get(name) for name in ("hostname", "started", "command")]
        if not isinstance(pid, int) or isinstance(pid, bool):
            return None
        strings = [value for value in texts if isinstance(value, str)]
        if len(strings) != len(texts):
            return None
        return cls(pid, *strings)

    def describe(self) -> str:
        return (
            f"binlake process {self.pid} on host {self.hostname} "
            f"(since {self.started}, command: {self.command})"
        )


class StateLock:
    """The lock of one state folder, held by this process until ``release``."""

    def __init__(self, path: Path, fd: int, holder: LockHolder) -> None:
        self.path = path
        self.holder = holder
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, state_dir: str | os.PathLike[str]) -> StateLock:
        """Take the lock now or raise ``StateLockedError`` naming the holder; never waits."""
        path = Path(state_dir) / LOCK_FILE_NAME
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise_os_error(exc, path, "opening the lock file")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            try:
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise _locked_error(path, _read_holder(fd)) from None
                raise_os_error(exc, path, "locking the state folder")
            finally:
                os.close(fd)
        holder = LockHolder.current()
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, holder.encode(), 0)
        except OSError as exc:
            os.close(fd)  # closing releases the lock
            raise_os_error(exc, path, "writing the lock file")
        return cls(path, fd, holder)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Empty the lock file and unlock it (closing would unlock it too)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass  # the content is only information; the unlock below is what matters
        finally:
            os.close(fd)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()


def read_holder(state_dir: str | os.PathLike[str]) -> LockHolder | None:
    """Who the lock file of ``state_dir`` names (the holder, or the last one if it died)."""
    try:
        return LockHolder.decode((Path(state_dir) / LOCK_FILE_NAME).read_bytes()[:_MAX_DETAILS])
    except FileNotFoundError:
        return None


def _read_holder(fd: int) -> LockHolder | None:
    """The holder's details; waits briefly when the holder has locked but not yet written."""
    deadline = time.monotonic() + _DETAILS_WAIT_S
    while True:
        try:
            holder = LockHolder.decode(os.pread(fd, _MAX_DETAILS, 0))
        except OSError:
            return None
        if holder is not None or time.monotonic() >= deadline:
            return holder
        time.sleep(0.01)


def _locked_error(path: Path, holder: LockHolder | None) -> StateLockedError:
    folder = path.parent
    if holder is None:
        return StateLockedError(
            f"state folder {folder} is in use by another process (it has not named itself)",
            file=str(path),
        )
    return StateLockedError(
        f"state folder {folder} is in use by {holder.describe()}",
        file=str(path),
        hint=(
            f"stop process {holder.pid} on {holder.hostname} first; if it has died the lock is "
            "already free and a retry succeeds (never delete the lock file)"
        ),
        holder_pid=holder.pid,
        holder_hostname=holder.hostname,
        holder_started=holder.started,
        holder_command=holder.command,
    )


def lock_state_folder(state_dir: Path) -> StateLock:
    """Create the state folder when it is new and take its lock: how every command that
    writes state starts (a second process refuses, naming the first)."""
    make_folder(state_dir, "state")
    return StateLock.acquire(state_dir)


@contextmanager
def folder_lock(folder: Path, name: str = ".lock") -> Iterator[None]:
    """An exclusive ``flock`` on ``folder/name`` (created), held inside the ``with``."""
    fd = os.open(folder / name, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
