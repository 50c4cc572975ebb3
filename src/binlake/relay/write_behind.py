"""Write-behind: the relay log writer's writes, made by a thread of their own.

Handing 500 MB of events to the OS (``writev`` into the page cache, then ``start_writeback``)
takes the receiver about 0.35 s of system calls. Made on the receiver's thread, that time adds
to everything else the thread does (framing, grouping, the source facts); made here, it overlaps
with them, since both calls let go of the GIL.

The contract is the one the plain calls give, in order:

- ``submit`` hands over a list of buffers for one file descriptor; they are written after
  everything submitted before them, each whole (a short write is resumed), and then their
  writeback is started;
- ``drain`` returns once everything submitted is written, so a caller that fsyncs after
  ``drain`` makes all of it durable; the relay log writer drains before every fsync, rotation,
  close and torn-write crash point, so no use of a descriptor overtakes a queued write;
- a failed write (``ENOSPC``, ``EFBIG``, ``EIO``) is kept: everything queued after it is
  dropped, and the next ``submit`` or ``drain`` raises that ``OSError`` (any other exception
  in the thread, a bug, is kept and raised the same way, so no caller waits forever);
- at most ``max_queued_bytes`` wait (``submit`` blocks until the thread catches up).

What a crash loses is unchanged: bytes still queued are bytes not yet synced, which no caller
takes for durable.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Sequence

from binlake.storage.durable import start_writeback

#: Buffers per ``writev`` call (Linux IOV_MAX is 1024).
IOV_MAX = 1024
#: Two gathered writes' worth (``FLUSH_BYTES`` each): the thread is never idle, and little
#: is held.
DEFAULT_MAX_QUEUED_BYTES = 2 << 20
#: A thread with nothing to write for this long ends (``submit`` starts another when needed).
IDLE_S = 1.0


def write_all(fd: int, buffers: Sequence[bytes]) -> None:
    """Write ``buffers`` in order at ``fd``'s offset: ``writev`` per IOV_MAX buffers, resuming
    after a short write.

    A write is never made inside a slice's bounds (``rest[os.write(fd, rest):]``): mypyc
    2.4.1 evaluates the bounds of a slice of anything but a list, tuple, str or bytes twice,
    so compiled, such a loop wrote every buffer twice (tests/unit/test_compiled.py checks
    the compiled modules for calls in slice bounds)."""
    for start in range(0, len(buffers), IOV_MAX):
        chunk = buffers[start : start + IOV_MAX]
        total = sum(map(len, chunk))
        written = os.writev(fd, chunk)
        if written < total:
            rest = b"".join(chunk)[written:]
            while rest:
                written = os.write(fd, rest)
                rest = rest[written:]


class WriteBehind:
    """One background thread writing submitted buffers in order; see the module docstring."""

    def __init__(self, max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES) -> None:
        self._max = max_queued_bytes
        self._queue: deque[tuple[int, list[bytes], int]] = deque()
        self._queued = 0
        self._busy = False
        self._error: Exception | None = None
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def submit(self, fd: int, buffers: list[bytes], nbytes: int) -> None:
        """Queue ``buffers`` (``nbytes`` in all) for ``fd``; raises an earlier write's error."""
        with self._cond:
            while self._queued >= self._max and self._error is None:
                self._cond.wait()
            self._raise_error()
            self._queue.append((fd, buffers, nbytes))
            self._queued += nbytes
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="binlake-relay-write", daemon=True
                )
                self._thread.start()
            else:
                self._cond.notify_all()

    def drain(self) -> None:
        """Wait until everything submitted is written; raises a write's error."""
        with self._cond:
            while (self._queue or self._busy) and self._error is None:
                self._cond.wait()
            self._raise_error()

    def _raise_error(self) -> None:
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        """Write what is queued, in order; end on a write error, or after ``IDLE_S`` without
        work."""
        while True:
            with self._cond:
                if not self._queue:
                    self._cond.wait(IDLE_S)
                if not self._queue:
                    self._thread = None
                    return
                fd, buffers, nbytes = self._queue.popleft()
                self._busy = True
            error = _write(fd, buffers)
            with self._cond:
                self._busy = False
                self._queued -= nbytes
                if error is not None:
                    self._error = error
                    self._queue.clear()
                    self._queued = 0
                    self._thread = None
                self._cond.notify_all()
                if error is not None:
                    return


def _write(fd: int, buffers: list[bytes]) -> Exception | None:
    try:
        write_all(fd, buffers)
        start_writeback(fd)
    except Exception as exc:  # raised by the caller's next submit or drain
        return exc
    return None
