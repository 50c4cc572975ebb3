"""A table's compaction and its batches' commits take turns, inside one ``binlake replicate``.

A compaction (Iceberg's ``RewriteDataFiles``) replaces data files; a row delta that deletes rows
of those files by position, committed while the compaction runs, makes the compaction's commit
fail (Iceberg's ``Cannot commit, found new position delete for replaced data file``). With
random keys nearly every batch deletes rows of the small files a compaction folds, so beside
batches every few seconds a compaction of a few seconds would lose every time, and the table
would never be compacted. Taking turns makes it win: once a compaction of a table is waiting,
no new commit to that table starts; the compaction starts when the table's commit in flight has
ended, and the commits wait until it has committed. The batch that waited then finds its base
snapshot replaced and is planned again from the compacted table (its key index caught up over
the compaction: ``binlake.keyindex``).

Its cost is the batches' wait: a compaction's length, which the fold policy keeps to the small
files and the mostly deleted ones (``FoldPolicy``). Other tables' commits never wait, nor do the
other maintenance steps (merging position deletes adds delete files, never removes a data file
a batch deletes from). A compaction by another process (``binlake maintain`` beside
``replicate``) does not take turns: it may lose to the batches and is retried
(docs/architecture.md, "Maintenance").
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Hashable, Iterator
from contextlib import contextmanager

__all__ = ["CompactionTurns"]


class CompactionTurns:
    """Per table: commits side by side, or one compaction alone."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._compacting: set[Hashable] = set()
        self._committing: Counter[Hashable] = Counter()

    @contextmanager
    def committing(self, table: Hashable) -> Iterator[None]:
        """A batch's commit to ``table``: waits while a compaction of it waits or runs."""
        with self._changed:
            self._changed.wait_for(lambda: table not in self._compacting)
            self._committing[table] += 1
        try:
            yield
        finally:
            with self._changed:
                self._committing[table] -= 1
                self._changed.notify_all()

    @contextmanager
    def compacting(self, table: Hashable) -> Iterator[None]:
        """A compaction of ``table``: no new commit starts; it waits for the one in flight."""
        with self._changed:
            self._changed.wait_for(lambda: table not in self._compacting)
            self._compacting.add(table)
            self._changed.wait_for(lambda: not self._committing[table])
        try:
            yield
        finally:
            with self._changed:
                self._compacting.discard(table)
                self._changed.notify_all()
