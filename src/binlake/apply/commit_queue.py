"""A batch's table commits, one at a time and in order, on a worker thread: the next table's
rows are decoded (pure Python, in memory) while the previous table's commit waits on the JVM.

Nothing durable changes order: a commit starts only once the one before it is done (``submit``
waits for it first, and raises its error), and whatever would write to a table before its
commit (a schema made or evolved, a backfill: ``Lake.prepare``) waits for the commit before it
(``wait``). Leaving the ``with`` block, on success or error, waits for the commit running: the
applier's retry never re-reads the tables while one is in flight. The worker is one long-lived
thread (PySpark pins a JVM thread and a gateway connection to each Python thread).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Generic, TypeVar

from binlake.crashpoints import crash_point

T = TypeVar("T")


class CommitQueue(Generic[T]):
    """Commits submitted in order; ``done`` holds their results once waited for."""

    def __init__(self, worker: ThreadPoolExecutor) -> None:
        self.worker = worker
        self.done: list[T] = []
        #: Commits made so far (names the crash point before the next one).
        self.count = 0
        self._pending: Future[T] | None = None

    def wait(self) -> None:
        """Wait for the commit in flight, if any (its error is raised here)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            self.done.append(pending.result())

    def submit(self, commit: Callable[[], T]) -> None:
        """Run ``commit`` once the previous commit is done: crash point
        ``apply_before_commit`` before a batch's first commit, ``apply_between_tables``
        before any other."""
        self.wait()
        self._pending = self.worker.submit(self._run, commit)

    def _run(self, commit: Callable[[], T]) -> T:
        crash_point("apply_between_tables" if self.count else "apply_before_commit")
        out = commit()
        self.count += 1
        return out

    def __enter__(self) -> CommitQueue[T]:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        pending, self._pending = self._pending, None
        if pending is None:
            return
        if kind is None:
            self.done.append(pending.result())
        else:
            # The error raised first wins; the commit in flight only has to end.
            pending.exception()


def commit_worker() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="binlake-commit")
