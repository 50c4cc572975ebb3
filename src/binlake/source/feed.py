"""A reader thread between the source connection and the receiver.

The dump iterator (``SourceConnection.dump_batches``) blocks on the socket. The receiver must
not: it has to fsync a group on time while the source is quiet, notice SIGTERM promptly, and
update progress. So one thread runs the iterator and hands the events over (``take``) in the
batches the iterator yields, one lock and at most one wake-up per batch; the receiver's thread
does every write and fsync. At most ``max_buffered_bytes`` wait in between (the reader stops
reading when the receiver falls behind, so TCP flow control slows the source down instead of
memory growing).

Nothing here decides anything about the events: bytes in, the same bytes out, in order; an error
raised by the iterator is raised by ``take`` after the events before it; an iterator that
ends (a blocking dump never should) is a ``SourceConnectionLostError``.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator

from binlake.errors import SourceConnectionLostError

#: 8 MiB: with 32 MiB (before the write-behind thread and zlib-ng's CRC32 made the socket
#: reader faster than the receiver) a 6 M-change transaction took `binlake receive` from 45 to
#: 99-131 MiB of RSS (the allocator keeps what the full queues once held); at 8 MiB it stays
#: at 59 MiB, at the same speed.
DEFAULT_MAX_BUFFERED_BYTES = 8 * 1024 * 1024


class EventFeed:
    def __init__(
        self,
        batches: Iterator[list[bytes]],
        max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES,
    ) -> None:
        self._batches = batches
        self._max = max_buffered_bytes
        self._queue: deque[list[bytes]] = deque()
        self._buffered = 0
        self._error: BaseException | None = None
        self._finished = False
        self._stopped = False
        self._cond = threading.Condition()
        self._consumer_waiting = False
        self._producer_waiting = False
        self._thread = threading.Thread(target=self._run, name="binlake-source-reader", daemon=True)

    def start(self) -> EventFeed:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            for batch in self._batches:
                if not self._put(batch):
                    return
            raise SourceConnectionLostError("the source ended the dump stream")
        except BaseException as error:  # handed over to the receiver's thread, raised there
            with self._cond:
                self._error = error
                self._finished = True
                self._cond.notify_all()

    def _put(self, batch: list[bytes]) -> bool:
        size = sum(map(len, batch))
        with self._cond:
            while self._buffered >= self._max and not self._stopped:
                self._producer_waiting = True
                self._cond.wait()
                self._producer_waiting = False
            if self._stopped:
                return False
            self._queue.append(batch)
            self._buffered += size
            if self._consumer_waiting:
                self._cond.notify_all()
        return True

    def take(self, timeout: float | None) -> list[bytes]:
        """The events waiting (at least one unless ``timeout`` passes first, then none).

        After the last event before an error, raises that error.
        """
        with self._cond:
            if not self._queue and not self._finished:
                self._consumer_waiting = True
                self._cond.wait(timeout)
                self._consumer_waiting = False
            if not self._queue:
                if self._finished and self._error is not None:
                    raise self._error
                return []
            batch = [event for queued in self._queue for event in queued]
            self._queue.clear()
            self._buffered = 0
            if self._producer_waiting:
                self._cond.notify_all()
            return batch

    def stop(self, join_timeout: float = 0.5) -> None:
        """Stop handing events over; the thread ends at its next event or error (it is a daemon
        thread: one still blocked on a dead socket never holds the process)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(join_timeout)
