"""A batch's table commits on a pool of worker threads: the tables of one batch commit side by
side, while the applier's thread plans the next table's changes.

Each table's commit carries its own position (the batch's), so commits to different tables are
independent: exactly-once per table holds whatever subset of them a crash lets land (the
restart reads each table's position and skips what it holds). What stays in order:

* a table has at most one commit in flight: a batch commits each table once, and a batch ends
  only when all its commits are done (leaving the ``with`` block waits for them, on success or
  error), so the next batch's commit to a table comes after this one's;
* whatever writes to a table before its commit (a schema made or evolved, a backfill:
  ``Lake.prepare``) waits for that table's commit in flight (``wait``); other tables' commits
  go on;
* the checkpoint counts a batch's transactions durable only once every commit of the batch is
  done (``apply.accounting``), and the applier's retry never re-reads the tables while a commit
  is in flight.

After the first failure no further commit of the batch starts; those in flight end, and the
first error is raised (the retry then reads every table again and applies the batch again,
each table skipping by position what went through). Crash points: ``apply_before_commit``
before a batch's first commit starts, ``apply_between_tables`` before any other starts (with
several workers, other commits of the batch may be in flight then: a kill there stops several
at once). The workers are long-lived threads (PySpark pins a JVM thread and a gateway
connection to each Python thread, and Iceberg's commit properties are a Java thread-local).

The pool's size is ``[applier] commit_threads``; the catalog serialises what it must (the
embedded catalog's SQLite file takes one writer at a time; docs/benchmarks.md, "Wide and busy",
measures where more threads stop helping).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Generic, TypeVar

from binlake.crashpoints import crash_point

T = TypeVar("T")


class CommitPool:
    """The worker threads; one ``BatchCommits`` per batch."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._executor = ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix="binlake-commit"
        )

    def batch(self) -> BatchCommits[T]:
        return BatchCommits(self._executor, self.workers)

    def close(self) -> None:
        """End the worker threads (no commit is in flight between batches)."""
        self._executor.shutdown(wait=True)


class BatchCommits(Generic[T]):
    """One batch's commits: at most one per table; ``done`` holds their results once the batch
    is over (in the order they finished)."""

    def __init__(self, executor: ThreadPoolExecutor, workers: int) -> None:
        self._executor = executor
        self.done: list[T] = []
        #: Commits started so far (names the crash point before the next one).
        self.count = 0
        self._lock = threading.Lock()
        self._pending: dict[Hashable, Future[T]] = {}
        #: Planned commits waiting for a worker are bounded: planning never runs far ahead.
        self._slots = threading.BoundedSemaphore(2 * workers)
        self._failed: BaseException | None = None

    def wait(self, table: Hashable) -> None:
        """Wait for ``table``'s commit in flight, if any (its error is raised here)."""
        pending = self._pending.pop(table, None)
        if pending is not None:
            self.done.append(pending.result())

    def submit(self, table: Hashable, commit: Callable[[], T]) -> None:
        """Run ``commit`` on a worker once one is free (blocks while the workers have enough
        queued); a failure of an earlier commit of the batch is raised here instead."""
        self._raise_failure()
        self.wait(table)
        self._slots.acquire()
        try:
            self._raise_failure()
        except BaseException:
            self._slots.release()
            raise
        self._pending[table] = self._executor.submit(self._run, commit)

    def _run(self, commit: Callable[[], T]) -> T:
        try:
            with self._lock:
                if self._failed is not None:
                    raise _SkippedError()
                first = self.count == 0
                self.count += 1
            crash_point("apply_before_commit" if first else "apply_between_tables")
            return commit()
        except _SkippedError:
            raise
        except BaseException as error:
            with self._lock:
                if self._failed is None:
                    self._failed = error
            raise
        finally:
            self._slots.release()

    def _raise_failure(self) -> None:
        failed = self._failed
        if failed is not None:
            raise failed

    def __enter__(self) -> BatchCommits[T]:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        pending, self._pending = self._pending, {}
        first: BaseException | None = None
        for future in pending.values():
            failure = future.exception()  # every commit in flight ends before the batch does
            if failure is None:
                self.done.append(future.result())
            elif first is None and not isinstance(failure, _SkippedError):
                first = failure
        if kind is None and (first or self._failed) is not None:
            raise first or self._failed  # type: ignore[misc]


class _SkippedError(Exception):
    """A commit not started because an earlier one of its batch failed."""
