"""The applier's checkpoint counts (MDEV-181): a transaction counts from when it is read until
the batch holding it is in every table; files not read yet are never the checkpoint; a pending
DDL holds its file; a restart rebuilds the counts by reading again from the recorded
checkpoint."""

from __future__ import annotations

from pathlib import Path

from apply_testing import fake_transaction
from binlake.apply.accounting import RelayAccounting
from binlake.apply.plan import Batch, Unit, UnitKind
from binlake.binlog.transactions import GroupKind
from binlake.storage.checkpoint import CheckpointRecord, CheckpointTracker, scan_start

A, B, C = "relay-bin.000001", "relay-bin.000002", "relay-bin.000003"


class Run:
    """One applier run: reads transactions (file, offset) and commits batches of them."""

    def __init__(self, record: CheckpointRecord, index: list[str]) -> None:
        self.accounting = RelayAccounting(CheckpointTracker(record, [scan_start(record, index)]))
        self.read_units: list[Unit] = []

    def read(self, file: str, offset: int, kind: GroupKind = GroupKind.TRANSACTION) -> Unit:
        unit = Unit(fake_transaction(file, offset, kind), UnitKind.NONE)
        self.accounting.on_read(file, is_transaction=unit.is_transaction)
        self.read_units.append(unit)
        return unit

    def commit(self, *units: Unit, held_by: str | None = None) -> None:
        self.accounting.on_batch_done(Batch(list(units), 0.0), held_by)

    @property
    def checkpoint(self) -> str:
        return self.accounting.tracker.checkpoint

    @property
    def recorded(self) -> str:
        return self.accounting.tracker.recorded_checkpoint


def test_a_file_stays_the_checkpoint_until_every_transaction_read_from_it_is_committed(
    tmp_path: Path,
) -> None:
    record = CheckpointRecord(tmp_path / "relay.checkpoint")
    run = Run(record, [A, B])
    a1, a2 = run.read(A, 100), run.read(A, 200)
    b1 = run.read(B, 100)
    run.commit(a1)
    assert run.checkpoint == A and run.accounting.tracker.pending(A) == 1
    run.commit(a2, b1)
    assert run.checkpoint == B and run.recorded == B
    assert record.read() == B
    assert run.accounting.tracker.purgeable() == [A]


def test_a_file_the_applier_has_not_reached_is_never_the_checkpoint(tmp_path: Path) -> None:
    record = CheckpointRecord(tmp_path / "relay.checkpoint")
    run = Run(record, [A, B, C])  # the receiver has written B and C already
    run.commit(run.read(A, 100))
    assert run.checkpoint == A and record.read() is None  # nothing moved: A is all it read
    run.read(B, 50, GroupKind.CONTROL)  # reaching B (its header) moves the checkpoint there
    assert run.checkpoint == B and record.read() == B
    assert run.accounting.tracker.files == (A, B)


def test_control_events_and_rollbacks_count_as_what_they_are(tmp_path: Path) -> None:
    run = Run(CheckpointRecord(tmp_path / "relay.checkpoint"), [A])
    run.read(A, 10, GroupKind.CONTROL)
    rollback = run.read(A, 20, GroupKind.ROLLBACK)
    assert run.accounting.tracker.pending(A) == 1
    run.commit(rollback)
    assert run.accounting.tracker.pending(A) == 0


def test_a_pending_ddl_keeps_its_file_counted_until_the_table_has_it(tmp_path: Path) -> None:
    record = CheckpointRecord(tmp_path / "relay.checkpoint")
    run = Run(record, [A, B])
    ddl = run.read(A, 100)
    run.commit(ddl, held_by="shop.orders")
    b1 = run.read(B, 100)
    run.commit(b1)
    assert run.checkpoint == A and len(run.accounting.holds) == 1
    run.accounting.holds.move("shop.orders", "shop.orders_v2")  # RENAME TABLE follows it
    run.accounting.holds.release("shop.orders")
    assert run.checkpoint == A
    run.accounting.holds.release("shop.orders_v2")  # the schema has the DDL now
    assert run.checkpoint == B and record.read() == B


def test_a_restart_rebuilds_the_counts_by_reading_again_from_the_recorded_checkpoint(
    tmp_path: Path,
) -> None:
    """Run 1 reads A and B, commits A and half of B, then dies. Run 2 starts at the recorded
    checkpoint (B), reads B again (its transactions count again until committed: each table
    skips by position what it has) and never looks at A."""
    record = CheckpointRecord(tmp_path / "relay.checkpoint")
    first = Run(record, [A, B])
    a = [first.read(A, offset) for offset in (100, 200)]
    b = [first.read(B, offset) for offset in (100, 200, 300)]
    first.commit(*a, b[0])
    assert record.read() == B
    del first  # crash: the counts were in memory only

    second = Run(record, [A, B, C])
    assert second.accounting.tracker.files == (B,)
    again = [second.read(B, offset) for offset in (100, 200, 300)]
    assert second.accounting.tracker.pending(B) == 3
    second.commit(*again[:2])
    assert second.checkpoint == B
    second.commit(again[2])
    second.read(C, 50, GroupKind.CONTROL)
    assert second.checkpoint == C and record.read() == C
    assert second.accounting.tracker.purgeable() == [B]
