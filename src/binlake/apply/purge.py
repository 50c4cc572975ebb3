"""The relay files the recorded checkpoint has passed, purged (MDEV-181).

Once the recorded checkpoint (``storage.checkpoint``) names a later relay file than the index's
first, every file strictly older holds only transactions every table has: they are removed
through the index (``LogIndex.purge``: the index rewritten first, then the files deleted), under
the receiver's index lock, which its rotations take too. The applier purges after each batch and
when it opens a reading (crash point ``apply_during_purge`` just before; the relay log's own
purge crash points follow it).
"""

from __future__ import annotations

import threading
from pathlib import Path

from binlake.crashpoints import crash_point
from binlake.relay import INDEX_NAME
from binlake.storage.checkpoint import CheckpointTracker
from binlake.storage.index import LogIndex


class RelayPurge:
    def __init__(self, relay_dir: Path, index_lock: threading.RLock) -> None:
        self.relay_dir = relay_dir
        self.index_lock = index_lock

    def index(self) -> LogIndex:
        return LogIndex(self.relay_dir / INDEX_NAME)

    def __call__(self, tracker: CheckpointTracker) -> int:
        """Remove the relay files strictly older than ``tracker``'s recorded checkpoint; the
        number removed."""
        recorded = tracker.recorded_checkpoint
        index = self.index()
        names = index.names()
        if recorded not in names or names.index(recorded) == 0:
            return 0
        crash_point("apply_during_purge")
        with self.index_lock:
            removed = index.purge(recorded, keep_from=recorded)
        tracker.on_files_purged([f for f in removed if f in tracker.files])
        return len(removed)
