"""Which Iceberg snapshot holds a table exactly as the source had it at position P (pure).

A table's snapshots carry the source position their data is at (``binlake.position``). Given P
(the source's consistent snapshot) the state at P is in Iceberg when:

* some binlake snapshot is at exactly P; or
* Q, the newest binlake snapshot at or before P, is followed in the source by no transaction
  that touches the table up to P: nothing in (Q, P] changed it, so its state at Q is its state
  at P. The relay log says which tables each transaction in (Q, P] touches (TABLE_MAP events;
  DDL by name, cautiously).

Otherwise (``decide``):

* **wait**: the table's newest binlake snapshot is before P and transactions in (A, P] touch it
  (the applier has not applied them yet), or the relay log does not reach P yet;
* **retry** with a new P: the newest snapshot at or before P is followed by changes to the table
  in (Q, P] that only a snapshot after P holds (a batch stepped over P), or every binlake
  snapshot is after P;
* **exact**: compare the source at P with that snapshot.

A table with no binlake snapshot at all has had nothing applied: its Iceberg state (the current
snapshot if any, else empty) is its state at P when no transaction up to P touches it. Relay
files older than the first one still listed were purged, which happens only once every
transaction in them is in every table it touches (MDEV-181 checkpoint): so when Q is the newest
snapshot, a purged range cannot hide an unapplied change to the table; when a newer snapshot
exists the purged range might, and that is a retry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from binlake.binlog.names import TableName
from binlake.lake.catalog.metadata import NEVER, LakeLineage, LakeSnapshot
from binlake.position import SourcePosition, at_or_before, before


class RelayView(Protocol):
    end: SourcePosition | None

    def touching(
        self,
        table: TableName,
        after: SourcePosition | None,
        until: SourcePosition,
        *,
        clean_before_coverage: bool = False,
    ) -> bool | None: ...


@dataclass(frozen=True)
class Exact:
    """Compare with ``snapshot`` (None: an empty table), whose data is at ``position``."""

    snapshot: LakeSnapshot | None
    position: SourcePosition | None


@dataclass(frozen=True)
class Wait:
    reason: str


@dataclass(frozen=True)
class ReadAgain:
    reason: str


@dataclass(frozen=True)
class Unknown:
    """No snapshot can say where the table is: compare nothing, report the reason."""

    reason: str


Decision = Exact | Wait | ReadAgain | Unknown


def scan_start(table: LakeLineage, target: SourcePosition) -> SourcePosition | None:
    """Where the relay log must be read from to decide ``table`` at ``target``."""
    newest = _newest_at_or_before(table, target)
    return None if newest is None else newest.position


def _newest_at_or_before(table: LakeLineage, target: SourcePosition) -> LakeSnapshot | None:
    """The newest binlake snapshot at or before ``target`` whose data can equal the source
    there (a snapshot copy's chunks are consistent only from their newest position on)."""
    bounds = table.consistent_from()
    for snapshot in table.binlake_snapshots:
        bound = bounds.get(snapshot.snapshot_id)
        usable = bound is None or (bound is not NEVER and at_or_before(bound, target))
        if usable and at_or_before(snapshot.position, target):
            return snapshot
    return None


def _copy_running(table: LakeLineage) -> bool:
    newest = table.binlake_snapshots[0]
    return table.consistent_from().get(newest.snapshot_id) is NEVER


def decide(
    table: LakeLineage, source_table: TableName, target: SourcePosition, relay: RelayView
) -> Decision:
    """What to do with ``table`` (replicating ``source_table``) at source position ``target``."""
    snapshots = table.binlake_snapshots
    if not snapshots and table.lineage_cut:
        return Unknown(
            "snapshot expiry cut its lineage before any binlake snapshot: the source position "
            "of its data is unknown"
        )
    if not snapshots:
        return _never_applied(table, source_table, target, relay)
    newest = snapshots[0]
    chosen = _newest_at_or_before(table, target)
    if chosen is None and _copy_running(table):
        return Wait("its snapshot copy is still running")
    if chosen is None:
        return ReadAgain(f"no binlake snapshot holds it consistently at or before {target}")
    q = chosen.position
    assert q is not None
    if q == target:
        return Exact(chosen, q)
    touched = relay.touching(source_table, q, target, clean_before_coverage=chosen is newest)
    if touched is None:
        if chosen is newest:
            return Wait(_relay_behind(relay, target))
        return ReadAgain(f"the relay log no longer holds the transactions after {q}")
    if not touched:
        return Exact(chosen, q)
    if chosen is newest:
        return Wait(f"transactions in ({q}, {target}] that change it are not applied yet")
    return ReadAgain(
        f"changes in ({q}, {target}] are only in a later snapshot (at {newest.position})"
    )


def _never_applied(
    table: LakeLineage, source_table: TableName, target: SourcePosition, relay: RelayView
) -> Decision:
    touched = relay.touching(source_table, None, target, clean_before_coverage=True)
    if touched is None:
        return Wait(_relay_behind(relay, target))
    if touched:
        return Wait(f"transactions up to {target} change it and none is applied yet")
    current = table.lineage[0] if table.lineage else None
    return Exact(current, None)


def _relay_behind(relay: RelayView, target: SourcePosition) -> str:
    end = relay.end
    if end is None:
        return f"the relay log holds nothing yet; it must reach {target}"
    if before(end, target):
        return f"the relay log ends at {end}, before {target}"
    return f"the relay log does not reach back far enough to decide at {target}"
