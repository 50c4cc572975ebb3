"""The expiry lock: a snapshot expiry holds it from its cut tags to its end, and the applier's
cut recording yields to it (docs/recovery.md, "Consistent cuts").

A cut recorded between an expiry's cut tags and the expiry itself would name a snapshot that
the expiry neither tagged nor must keep. The two can meet in one process (a scheduled round of
``binlake replicate`` beside its batches) or in two (``binlake maintain`` beside a running
``replicate``), so the lock is both:

- a ``threading.Lock``, for the threads of one process;
- an advisory ``flock`` on ``<state>/expiry.lock``, for processes of this host that use the
  same state folder. Each acquisition opens the file anew: ``flock`` locks belong to an open
  file, so two opens conflict even in one process, and the kernel releases the lock when its
  holder ends in any way (kill -9 included). The file is empty and never deleted, like the
  state folder's ``lock`` (``storage/lock.py``).

A ``binlake maintain`` whose config names a state folder that does not exist here (run on
another host than ``replicate``) takes the thread lock only: ``flock`` is local, and there is
nothing of this host to share it with.
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path
from types import TracebackType

from binlake.storage.durable import raise_os_error

EXPIRY_LOCK_FILE_NAME = "expiry.lock"


class ExpiryLock:
    """Held by an expiry (``with``, waiting); tried by cut recording (``acquire``)."""

    def __init__(self, state_dir: Path | None) -> None:
        self.state_dir = state_dir
        self._thread_lock = threading.Lock()
        self._fd: int | None = None

    def acquire(self, blocking: bool = True) -> bool:
        """Take the lock; not ``blocking``: False at once when another thread or process
        holds it."""
        if not self._thread_lock.acquire(blocking=blocking):
            return False
        try:
            taken = self._lock_file(blocking)
        except BaseException:
            self._thread_lock.release()
            raise
        if not taken:
            self._thread_lock.release()
        return taken

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the only descriptor of its open file releases the flock
        self._thread_lock.release()

    def __enter__(self) -> ExpiryLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    @property
    def path(self) -> Path | None:
        """The lock file; None while there is no state folder here to share it through."""
        if self.state_dir is None or not self.state_dir.is_dir():
            return None
        return self.state_dir / EXPIRY_LOCK_FILE_NAME

    def _lock_file(self, blocking: bool) -> bool:
        path = self.path
        if path is None:
            return True
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise_os_error(exc, path, "opening the expiry lock")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return False
        except OSError as exc:
            os.close(fd)
            raise_os_error(exc, path, "locking the expiry lock")
        self._fd = fd
        return True
