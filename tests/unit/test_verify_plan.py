"""Which Iceberg snapshot holds a table as the source had it at P, or whether to wait or retry:
the (Q, P] rule of `binlake verify`, on relay transactions and snapshot lineages."""

from __future__ import annotations

from pathlib import Path

from binlake.lake.catalog.metadata import LakeLineage, LakeSnapshot
from binlake.position import SourcePosition
from binlake.relay.scan import RelayFollower, RelayTransaction
from binlake.verify.plan import Exact, ReadAgain, Unknown, Wait, decide

FILE = "mariadb-bin.000001"
TABLE = "shop.orders"


def pos(offset: int, file: str = FILE) -> SourcePosition:
    return SourcePosition(file, offset)


def lake(*positions: int | None) -> LakeLineage:
    """A lineage (newest first) of snapshots at these positions (None: not a binlake one)."""
    snapshots = []
    for i, offset in enumerate(positions):
        summary = {} if offset is None else {"binlake.position": str(pos(offset))}
        snapshots.append(LakeSnapshot(100 - i, 99 - i, 0, summary))
    return LakeLineage(("shop", "orders"), tuple(snapshots))


def relay(end: int, *changes: tuple[int, str], coverage: int | None = None) -> RelayFollower:
    """A relay log read up to ``end`` holding transactions (end offset, table)."""
    follower = RelayFollower(Path("/never/read"))  # its fields are set here, not read
    follower.transactions = [
        RelayTransaction(pos(o), 0, frozenset({t}), None, "relay-bin.000001", 0) for o, t in changes
    ]
    follower.end = pos(end)
    follower.coverage_start = None if coverage is None else pos(coverage)
    return follower


def test_a_snapshot_at_exactly_p_is_compared() -> None:
    decision = decide(lake(500, 300), TABLE, pos(500), relay(400))
    assert isinstance(decision, Exact) and decision.position == pos(500)


def test_changes_to_other_tables_after_q_do_not_matter() -> None:
    decision = decide(lake(300), TABLE, pos(500), relay(500, (400, "shop.items")))
    assert decision == Exact(lake(300).lineage[0], pos(300))


def test_an_unapplied_change_to_the_table_means_waiting() -> None:
    decision = decide(lake(300), TABLE, pos(500), relay(500, (400, TABLE)))
    assert isinstance(decision, Wait) and "not applied yet" in decision.reason


def test_a_relay_log_that_has_not_reached_p_means_waiting() -> None:
    decision = decide(lake(300), TABLE, pos(500), relay(450))
    assert isinstance(decision, Wait) and "ends at" in decision.reason


def test_a_batch_that_stepped_over_p_means_a_retry() -> None:
    decision = decide(lake(600, 300), TABLE, pos(500), relay(700, (400, TABLE)))
    assert isinstance(decision, ReadAgain) and "later snapshot" in decision.reason


def test_an_older_snapshot_with_no_change_up_to_p_is_exact_even_if_newer_ones_exist() -> None:
    decision = decide(lake(600, 300), TABLE, pos(500), relay(700, (550, TABLE)))
    assert isinstance(decision, Exact) and decision.position == pos(300)


def test_snapshots_all_after_p_mean_a_retry() -> None:
    assert isinstance(decide(lake(600), TABLE, pos(500), relay(700)), ReadAgain)


def test_snapshots_binlake_did_not_make_are_skipped() -> None:
    decision = decide(lake(None, 300), TABLE, pos(500), relay(500))
    assert isinstance(decision, Exact) and decision.position == pos(300)
    assert decision.snapshot is not None and decision.snapshot.snapshot_id == 99


def test_a_table_never_applied_is_empty_at_p_unless_a_change_is_waiting() -> None:
    empty = LakeLineage(("shop", "orders"), ())
    assert decide(empty, TABLE, pos(500), relay(500)) == Exact(None, None)
    waiting = decide(empty, TABLE, pos(500), relay(500, (200, TABLE)))
    assert isinstance(waiting, Wait)


def test_purged_relay_files_before_the_newest_snapshot_hold_no_unapplied_change() -> None:
    """Purge removes a file only once all its transactions are in every table they touch."""
    decision = decide(lake(300), TABLE, pos(500), relay(500, coverage=350))
    assert isinstance(decision, Exact) and decision.position == pos(300)


def test_purged_relay_files_before_an_older_snapshot_mean_a_retry() -> None:
    decision = decide(lake(600, 300), TABLE, pos(500), relay(700, coverage=350))
    assert isinstance(decision, ReadAgain) and "no longer holds" in decision.reason


def test_positions_compare_across_binlog_files() -> None:
    later_file = SourcePosition("mariadb-bin.000002", 4)
    decision = decide(lake(300), TABLE, later_file, relay(0, (400, "shop.items")))
    assert isinstance(decision, Wait), "the relay log ends in the older file"


def test_a_lineage_cut_by_expiry_before_any_binlake_snapshot_is_unknown_not_empty() -> None:
    cut = LakeLineage(("shop", "orders"), lake(None).lineage, lineage_cut=True)
    decision = decide(cut, TABLE, pos(500), relay(500))
    assert isinstance(decision, Unknown) and "expiry" in decision.reason
