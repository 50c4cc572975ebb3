"""Reading ahead: the relay log's next groups are read, decoded and classified on a thread
while the applier commits a batch.

A batch's commits wait on the JVM (Py4J releases the GIL while it waits), so decoding the next
groups then costs no wall time. ``ahead(items, size)`` yields what ``items`` yields, in order,
produced on a worker thread that stays at most ``max_bytes`` (by ``size``) or ``max_items``
ahead; an exception of the producer is raised where its item would have come. Leaving the loop
early (a stop, an error in the consumer) cancels the producer and waits for it: nothing runs on
once the caller moved on. Reading ahead changes nothing durable: positions move only as the
consumer applies what it took.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Generator, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")

MAX_BYTES = 64 << 20
MAX_ITEMS = 20_000
_PUT_WAIT_S = 0.05


class _End:
    """The producer is done (``error``: it failed)."""

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


class _Ahead(Generic[T]):
    def __init__(self, size: Callable[[T], int], max_bytes: int, max_items: int) -> None:
        self.size = size
        self.max_bytes = max_bytes
        self.items: queue.Queue[T | _End] = queue.Queue(maxsize=max_items)
        self.cancelled = threading.Event()
        self.room = threading.Condition()
        self.held = 0

    def produce(self, source: Iterator[T]) -> None:
        end = _End(None)
        try:
            for item in source:
                if not self._wait_for_room(self.size(item)):
                    return
                self._put(item)
        except BaseException as error:  # handed to the consumer, raised there
            end = _End(error)
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()
        self._put(end)

    def _wait_for_room(self, size: int) -> bool:
        with self.room:
            while self.held and self.held + size > self.max_bytes:
                if self.cancelled.is_set():
                    return False
                self.room.wait(_PUT_WAIT_S)
            self.held += size
        return not self.cancelled.is_set()

    def _put(self, item: T | _End) -> None:
        while not self.cancelled.is_set():
            try:
                self.items.put(item, timeout=_PUT_WAIT_S)
                return
            except queue.Full:
                continue

    def take(self) -> T | _End:
        item = self.items.get()
        if not isinstance(item, _End):
            with self.room:
                self.held -= self.size(item)
                self.room.notify()
        return item


def ahead(
    source: Iterator[T],
    size: Callable[[T], int],
    *,
    max_bytes: int = MAX_BYTES,
    max_items: int = MAX_ITEMS,
) -> Generator[T, None, None]:
    """``source``'s items, produced on a worker thread up to ``max_bytes``/``max_items``
    ahead of the consumer (see the module docstring)."""
    state: _Ahead[T] = _Ahead(size, max_bytes, max_items)
    worker = threading.Thread(
        target=state.produce, args=(source,), name="binlake-read-ahead", daemon=True
    )
    worker.start()
    try:
        while True:
            item = state.take()
            if isinstance(item, _End):
                if item.error is not None:
                    raise item.error
                return
            yield item
    finally:
        state.cancelled.set()
        worker.join()
