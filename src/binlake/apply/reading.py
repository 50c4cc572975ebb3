"""Reading the relay log into batches: the applier's *readings*, each from the recorded
checkpoint (MDEV-181) on.

A reading is opened at the applier's start and again after a copy is done (``apply.holds``),
exactly as a restart opens one (``RelayReadings.open``): the checkpoint record is read, the
checkpoint tracker starts at the recorded file (its record made only once the local warehouse is
fsynced, ``storage.warehouse_sync``), and a relay reader, a batch applier (``batch_apply``) and
the checkpoint counts (``accounting``) are made for it. The previous reading is closed first.

Then, up to each durable end the receiver publishes (``Reading``): the relay log's groups are read
and classified (``plan.classify``) on the read-ahead thread (``prefetch``); each one taken is
counted for the checkpoint (``RelayAccounting.on_read``) and added to the open batch
(``plan.BatchBuilder``), which returns the batches it completes. What outlives a reading
(``Batching``): the batch builder (empty whenever a reading ends: the open batch is committed
first) and the gap check.

The gap check (design "Recovery routine", step 5): when the relay log is empty at the start and
tables hold positions, the receiver fetches from the source's oldest binlog; if the first source
position read is in a file after the furthest-behind table's applied position, the transactions
between are gone (``SourcePositionLostError``). A table whose applied position is past the relay
log's restart point (the relay log lost a tail the applier had applied, WL#4621) skips by
position what it has: said once, at the start.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from binlake.apply.accounting import RelayAccounting
from binlake.apply.batch_apply import BatchApplier
from binlake.apply.plan import Batch, BatchBuilder, Bounds, GroupEvents, Selected, Unit, classify
from binlake.apply.prefetch import ahead
from binlake.binlog.names import TableName
from binlake.config import Config, OnDrop
from binlake.console import Console
from binlake.errors import BinlakeError, SourcePositionLostError
from binlake.lake.catalog.target import LakeTarget
from binlake.lake.tables.lake import AppliedState, Lake
from binlake.position import RelayPosition, SourcePosition, before, earliest
from binlake.relay import INDEX_NAME
from binlake.relay.reader import RelayGroup, RelayReader, group_events
from binlake.storage.checkpoint import CheckpointRecord, CheckpointTracker, scan_start
from binlake.storage.index import LogIndex
from binlake.storage.warehouse_sync import WarehouseSync, warehouse_sync_for
from binlake.typemap import ZeroDateCounts

#: Longest wait for the relay log before the loop looks at the stop flag and the clocks.
POLL_S = 0.25

#: A relay group and its unit (or why it has none: raised where the group is taken).
Classified = tuple[RelayGroup, Unit | BinlakeError]


class GapCheck:
    """The check of an empty relay log's first source position (see the module docstring):
    armed with the furthest-behind table at the start, made once."""

    def __init__(self) -> None:
        self._armed: tuple[TableName, SourcePosition] | None = None

    def arm(self, positions: Mapping[TableName, SourcePosition]) -> None:
        first = earliest(positions.values())
        table = next(t for t, p in positions.items() if p == first)
        self._armed = (table, first)

    def check(self, first: SourcePosition | None) -> None:
        """``first``: the first source position read (None: none yet, the check waits)."""
        if self._armed is None or first is None:
            return
        table, applied = self._armed
        self._armed = None
        if applied.file != first.file and before(applied, first):
            raise SourcePositionLostError(
                f"the relay log was empty and the source's oldest binlog starts at {first}, "
                f"after {table}'s applied position {applied}: the transactions between are "
                "no longer on the source",
                requested=str(applied),
            )


@dataclass
class Batching:
    """What the readings share: the open batch, the gap check, the replicated tables."""

    builder: BatchBuilder
    selected: Selected
    console: Console
    gap: GapCheck = field(default_factory=GapCheck)


@dataclass
class Reading:
    """One reading of the relay log, from the recorded checkpoint (see the module docstring)."""

    reader: RelayReader
    #: The relay-log checkpoint counts (MDEV-181) and the DDL holds.
    accounting: RelayAccounting
    batches: BatchApplier
    #: fsyncs the local warehouse before each checkpoint record.
    warehouse_sync: WarehouseSync
    batching: Batching

    @property
    def position(self) -> RelayPosition:
        """Where the reading stands: the end of the last group read."""
        return self.reader.position

    def wait_s(self) -> float:
        """How long the loop may wait for the relay log: until the open batch is due."""
        builder = self.batching.builder
        batch = builder.open_batch
        if batch is None:
            return POLL_S
        left = batch.started + builder.open_s - time.monotonic()
        return max(0.0, min(POLL_S, left))

    def groups(self, limit: RelayPosition) -> Generator[Classified, None, None]:
        """The relay log's groups up to ``limit``, classified, read ahead on a thread while
        batches commit (``binlake.apply.prefetch``)."""
        selected = self.batching.selected
        events_of = partial(group_events, self.reader.relay_dir)
        classified = (_classified(g, selected, events_of) for g in self.reader.read(limit))
        return ahead(classified, _classified_size)

    def take(self, classified: Classified) -> list[Batch]:
        """Count the group for the checkpoint and add its unit to the open batch: the batches
        that completes."""
        group, unit = classified
        self.batching.gap.check(group.position)
        if isinstance(unit, BinlakeError):
            raise unit
        self.accounting.on_read(group.relay_file, is_transaction=unit.is_transaction)
        if group.aside_context is not None:
            self.batching.console.message(
                "apply",
                f"transaction {group.group.gtid or group.relay} holds "
                f"{group.size / (1 << 20):,.1f} MiB, more than [applier] max_bytes: its row "
                "images are read from the relay log as they are applied, not held in memory",
            )
        return self.batching.builder.add(unit, time.monotonic())

    def due(self) -> list[Batch]:
        """The open batch, once it has been open for ``[applier] max_seconds`` (longer when
        the batch before took longer to commit, ``BatchBuilder.pace``; up to ``max_lag_s``
        while it holds a backlog: ``BatchBuilder.due``)."""
        builder = self.batching.builder
        return builder.flush() if builder.due(time.monotonic(), time.time()) else []

    def flush(self) -> list[Batch]:
        """The open batch, whatever its age."""
        return self.batching.builder.flush()

    def read_all(self) -> None:
        """Everything up to the limit was read: a preamble without transactions has a source
        position too (the gap check)."""
        self.batching.gap.check(self.reader.source_position)

    def close(self) -> None:
        self.batches.close()


@dataclass(frozen=True)
class RelayReadings:
    """Opens the applier's readings (see the module docstring)."""

    relay_dir: Path
    checkpoint_path: Path
    #: ``[applier] max_bytes``: a group larger is set aside by the reader (``plan.AsideRows``).
    hold_bytes: int
    #: ``[applier] commit_threads``: a batch's tables committed side by side.
    commit_threads: int
    on_drop: OnDrop
    target: LakeTarget
    lake: Lake
    #: Zero dates written as null, counted as rows are converted (``ApplyResult.zero_dates``).
    zero_dates: ZeroDateCounts
    batching: Batching

    @classmethod
    def of(
        cls,
        config: Config,
        target: LakeTarget,
        lake: Lake,
        console: Console,
        zero_dates: ZeroDateCounts,
    ) -> RelayReadings:
        applier = config.applier
        bounds = Bounds(
            applier.max_transactions, applier.max_bytes, applier.max_seconds, applier.max_lag_s
        )
        return cls(
            relay_dir=config.state.relay_dir,
            checkpoint_path=config.state.checkpoint_path,
            hold_bytes=applier.max_bytes,
            commit_threads=applier.commit_threads,
            on_drop=config.tables.on_drop,
            target=target,
            lake=lake,
            zero_dates=zero_dates,
            batching=Batching(BatchBuilder(bounds), target.selected, console),
        )

    def open(self, applied: AppliedState, held: Iterable[TableName]) -> Reading:
        """A reading from the recorded checkpoint; ``held``: tables whose changes wait for
        their copies (``apply.holds``)."""
        record = CheckpointRecord(self.checkpoint_path)
        start = scan_start(record, LogIndex(self.relay_dir / INDEX_NAME).names())
        # The checkpoint moves only once the lake's files it moves past are fsynced.
        warehouse_sync = warehouse_sync_for(self.target, unsynced_since=record.written_ns())
        accounting = RelayAccounting(
            CheckpointTracker(record, [start], before_record=warehouse_sync.sync)
        )
        batches = BatchApplier(
            self.lake,
            selected=self.target.selected,
            on_drop=self.on_drop,
            holds=accounting.holds,
            zero_dates=self.zero_dates,
            commit_threads=self.commit_threads,
        )
        batches.copy_holds.add(held)
        reader = RelayReader(self.relay_dir, start, hold_bytes=self.hold_bytes)
        self.batching.console.message(
            "apply",
            f"reading the relay log from {start} (checkpoint); {len(applied.positions)} tables "
            f"hold batches up to #{applied.max_batch}",
        )
        return Reading(reader, accounting, batches, warehouse_sync, self.batching)

    def check_restart(
        self, restart: SourcePosition | None, positions: Mapping[TableName, SourcePosition]
    ) -> None:
        """At the start: the gap check armed when the relay log is empty (``restart`` None) and
        tables hold positions; a lost tail already applied said per table."""
        console = self.batching.console
        if restart is None and positions:
            self.batching.gap.arm(positions)
            console.message(
                "apply",
                f"the relay log starts empty; {len(positions)} tables skip by position "
                "what they already hold (a snapshot, or an earlier state folder)",
            )
        for table, position in sorted(positions.items()):
            if restart is not None and before(restart, position):
                console.message(
                    "apply",
                    f"relay log lost a tail already applied to {table} (at {position}); "
                    f"refetching from {restart}; {table} skips "
                    "what it has by position (WL#4621)",
                )


def _classified(group: RelayGroup, selected: Selected, events_of: GroupEvents) -> Classified:
    try:
        return group, classify(group, selected, events_of)
    except BinlakeError as error:
        return group, error


def _classified_size(classified: Classified) -> int:
    return classified[0].size
