"""The relay-log checkpoint counts (MDEV-181) as the applier keeps them.

The applier is their one owner: it is the one that reads the relay log. ``on_read`` adds a
relay file to the ``CheckpointTracker`` when the reader reaches it and counts each transaction
there as it is read; ``on_batch_done`` reports a batch's transactions durable once every table
it touches has committed it (or already had it). Files the reader has not reached are not
tracked, so the checkpoint (the oldest file with a non-zero count, else the newest tracked
file) is never past what the applier has applied.

A DDL whose column changes are pending on a table (planned at the table's next TABLE_MAP, see
``binlake.lake.tables.lake``) keeps its transaction counted (``DdlHolds``) until the table's schema
has it or the table is gone: until then a restart must read the DDL again.

After a crash the counts are rebuilt by the same code: reading starts at the recorded
checkpoint, every transaction read counts again, and it stops counting when the batch holding
it is done: a transaction counts until every table it touches has its position.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from binlake.apply.plan import Batch
from binlake.binlog.names import TableName
from binlake.storage.checkpoint import CheckpointTracker


class DdlHolds:
    """Relay-log transactions kept counted because their DDL is pending on a table: released,
    through ``on_released(file, n)``, once the table's schema has it or the table is gone;
    moved with the table when it is renamed."""

    def __init__(self, on_released: Callable[[str, int], None]) -> None:
        self.on_released = on_released
        self._files: dict[TableName, Counter[str]] = {}

    def hold(self, table: TableName, file: str) -> None:
        self._files.setdefault(table, Counter())[file] += 1

    def move(self, old: TableName, new: TableName) -> None:
        files = self._files.pop(old, None)
        if files is not None:
            self._files.setdefault(new, Counter()).update(files)

    def release(self, table: TableName) -> None:
        for file, count in (self._files.pop(table, None) or Counter()).items():
            self.on_released(file, count)

    def __len__(self) -> int:
        return sum(sum(files.values()) for files in self._files.values())


class RelayAccounting:
    """Feeds the checkpoint tracker from what the applier reads and commits."""

    def __init__(self, tracker: CheckpointTracker) -> None:
        self.tracker = tracker
        self.holds = DdlHolds(self._released)

    def on_read(self, relay_file: str, *, is_transaction: bool) -> None:
        """A group of ``relay_file`` was read (in relay-log order)."""
        if relay_file not in self.tracker.files:
            self.tracker.on_file_added(relay_file)
        if is_transaction:
            self.tracker.on_transaction_appended(relay_file)

    def on_batch_done(
        self, batch: Batch, held_by: TableName | None = None, copy_held: Counter[str] | None = None
    ) -> None:
        """Every table ``batch`` touches has it; ``held_by``: a table whose pending DDL keeps
        the batch's (DDL) transaction counted; ``copy_held``: transactions per relay file held
        back for tables being copied (they stay counted until the relay log is read again)."""
        counts = batch.transactions_per_file()
        counts.subtract(copy_held or Counter())
        if held_by is not None:
            file = batch.last.relay_file
            counts[file] -= 1
            self.holds.hold(held_by, file)
        for file, count in counts.items():
            if count > 0:
                self.tracker.on_transactions_durable(file, count)

    def _released(self, file: str, count: int) -> None:
        if file in self.tracker.files:
            self.tracker.on_transactions_durable(file, count)
