"""Relay-log checkpoint (MDEV-181): count math, forward-only recording, purge boundaries."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from binlake.errors import CheckpointError, CheckpointRecordError
from binlake.storage.checkpoint import (
    CheckpointRecord,
    CheckpointTracker,
    decode_record,
    encode_record,
    scan_start,
)
from binlake.storage.durable import FSYNC_COUNTS

F1, F2, F3, F4 = "relay.000001", "relay.000002", "relay.000003", "relay.000004"


def record_in(tmp_path: Path) -> CheckpointRecord:
    return CheckpointRecord(tmp_path / "relay.checkpoint")


def tracker_with(tmp_path: Path, files: list[str], **pending: int) -> CheckpointTracker:
    counts = {f"relay.{int(name[1:]):06d}": n for name, n in pending.items()}
    return CheckpointTracker(record_in(tmp_path), files, counts)


def append(tracker: CheckpointTracker, file: str, n: int) -> None:
    for _ in range(n):
        tracker.on_transaction_appended(file)


# --- the checkpoint -----------------------------------------------------------------------------


def test_with_nothing_pending_the_checkpoint_is_the_newest_file(tmp_path: Path) -> None:
    tracker = tracker_with(tmp_path, [F1, F2, F3])
    assert tracker.checkpoint == F3
    assert record_in(tmp_path).read() == F3


def test_the_checkpoint_is_the_oldest_file_with_pending_transactions(tmp_path: Path) -> None:
    tracker = tracker_with(tmp_path, [F1])
    append(tracker, F1, 2)
    tracker.on_file_added(F2)
    append(tracker, F2, 3)
    assert tracker.checkpoint == F1
    tracker.on_transactions_durable(F1, 2)
    assert tracker.checkpoint == F2
    assert record_in(tmp_path).read() == F2


def test_durability_out_of_order_jumps_over_finished_files(tmp_path: Path) -> None:
    # MDEV-181: "if we manage to flush all commits in binlog (N-1) before the last commit in
    # binlog (N-2), we go directly from binlog checkpoint (N-2) to N".
    tracker = tracker_with(tmp_path, [F1])
    append(tracker, F1, 1)
    tracker.on_file_added(F2)
    append(tracker, F2, 2)
    tracker.on_file_added(F3)
    append(tracker, F3, 1)
    tracker.on_transactions_durable(F2, 2)  # N-1 finishes first
    assert tracker.checkpoint == F1
    assert record_in(tmp_path).read() is None  # nothing moved: nothing recorded
    tracker.on_transactions_durable(F1, 1)  # N-2 finishes: straight to N
    assert tracker.checkpoint == F3
    assert record_in(tmp_path).read() == F3
    assert tracker.pending(F3) == 1


def test_a_batch_reports_several_transactions_of_a_file_at_once(tmp_path: Path) -> None:
    tracker = tracker_with(tmp_path, [F1, F2], f1=0, f2=5)
    tracker.on_transactions_durable(F2, 3)
    assert tracker.pending(F2) == 2
    tracker.on_transactions_durable(F2, 0)
    assert tracker.pending(F2) == 2


def test_the_checkpoint_is_recorded_only_when_it_moves_forward(tmp_path: Path) -> None:
    tracker = tracker_with(tmp_path, [F1])
    record = record_in(tmp_path)
    before = FSYNC_COUNTS["checkpoint"]
    append(tracker, F1, 3)
    tracker.on_transactions_durable(F1, 1)
    tracker.on_transactions_durable(F1, 1)
    assert not record.path.exists()  # F1 is still the checkpoint: no write, no fsync
    assert FSYNC_COUNTS["checkpoint"] == before
    tracker.on_file_added(F2)
    assert not record.path.exists()
    tracker.on_transactions_durable(F1, 1)
    assert record.read() == F2
    assert FSYNC_COUNTS["checkpoint"] - before == 2  # the record file and its folder
    append(tracker, F2, 1)
    tracker.on_transactions_durable(F2, 1)  # F2 is newest: the checkpoint stays
    assert FSYNC_COUNTS["checkpoint"] - before == 2


def test_rotation_never_waits_for_pending_transactions(tmp_path: Path) -> None:
    tracker = tracker_with(tmp_path, [F1], f1=100)
    tracker.on_file_added(F2)
    tracker.on_file_added(F3)
    append(tracker, F3, 1)
    assert tracker.files == (F1, F2, F3)
    assert tracker.checkpoint == F1


def test_rotation_with_nothing_pending_moves_the_checkpoint_to_the_new_file(
    tmp_path: Path,
) -> None:
    tracker = tracker_with(tmp_path, [F1])
    tracker.on_file_added(F2)
    assert tracker.checkpoint == F2
    assert record_in(tmp_path).read() == F2


# --- purge boundaries -----------------------------------------------------------------------------


def test_purgeable_files_are_strictly_older_than_the_checkpoint(tmp_path: Path) -> None:
    tracker = tracker_with(tmp_path, [F1, F2, F3, F4], f3=1)
    assert tracker.checkpoint == F3
    assert tracker.purgeable() == [F1, F2]
    tracker.on_transactions_durable(F3, 1)
    assert tracker.purgeable() == [F1, F2, F3]
    assert F4 not in tracker.purgeable()


def test_nothing_is_purgeable_while_the_oldest_file_has_pending_work(tmp_path: Path) -> None:
    tracker = tracker_with(tmp_path, [F1, F2], f1=1, f2=1)
    assert tracker.purgeable() == []


def test_purged_files_are_forgotten_and_the_checkpoint_stays(tmp_path: Path) -> None:
    tracker = tracker_with(tmp_path, [F1, F2, F3], f2=1)
    tracker.on_files_purged([F1])
    assert tracker.files == (F2, F3)
    assert tracker.checkpoint == F2
    assert tracker.purgeable() == []


def test_purging_the_checkpoint_or_a_newer_file_is_refused(tmp_path: Path) -> None:
    tracker = tracker_with(tmp_path, [F1, F2, F3], f2=1)
    with pytest.raises(CheckpointError, match="not older than the recorded checkpoint"):
        tracker.on_files_purged([F2])
    with pytest.raises(CheckpointError):
        tracker.on_files_purged([F3])
    assert tracker.files == (F1, F2, F3)


# --- impossible reports -----------------------------------------------------------------------


def test_more_durable_transactions_than_pending_is_an_error(tmp_path: Path) -> None:
    tracker = tracker_with(tmp_path, [F1], f1=1)
    with pytest.raises(CheckpointError, match="only 1 are pending"):
        tracker.on_transactions_durable(F1, 2)
    assert tracker.pending(F1) == 1


def test_an_unknown_relay_file_is_an_error(tmp_path: Path) -> None:
    tracker = tracker_with(tmp_path, [F1])
    with pytest.raises(CheckpointError, match="not tracked"):
        tracker.on_transaction_appended(F2)
    with pytest.raises(CheckpointError, match="already tracked"):
        tracker.on_file_added(F1)


def test_appending_to_a_file_older_than_the_checkpoint_is_an_error(tmp_path: Path) -> None:
    tracker = tracker_with(tmp_path, [F1, F2])
    with pytest.raises(CheckpointError, match="older than the checkpoint"):
        tracker.on_transaction_appended(F1)


def test_a_relay_file_name_with_a_folder_or_space_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        CheckpointTracker(record_in(tmp_path), ["dir/relay.000001"])
    with pytest.raises(ValueError):
        CheckpointTracker(record_in(tmp_path), ["relay 1"])


# --- restart: counts rebuilt, record is the lower bound -------------------------------------


def test_restart_scans_from_the_recorded_checkpoint_and_rebuilds_counts(tmp_path: Path) -> None:
    first = tracker_with(tmp_path, [F1, F2, F3], f2=2, f3=1)
    assert record_in(tmp_path).read() == F2
    del first  # a crash: the counts are gone, the record stays
    record = record_in(tmp_path)
    assert scan_start(record, [F1, F2, F3]) == F2
    rebuilt = CheckpointTracker(record, [F1, F2, F3], {F2: 2, F3: 1})
    assert rebuilt.checkpoint == F2
    assert rebuilt.purgeable() == [F1]


def test_restart_moves_the_record_forward_when_rebuilt_counts_allow(tmp_path: Path) -> None:
    tracker_with(tmp_path, [F1, F2, F3], f1=1)
    assert record_in(tmp_path).read() is None  # F1, the first file: nothing to record
    rebuilt = CheckpointTracker(record_in(tmp_path), [F1, F2, F3], {F3: 1})
    assert rebuilt.checkpoint == F3
    assert record_in(tmp_path).read() == F3


def test_rebuilt_counts_in_files_older_than_the_record_are_refused(tmp_path: Path) -> None:
    record_in(tmp_path).write(F2)
    with pytest.raises(CheckpointError, match="lower bound"):
        CheckpointTracker(record_in(tmp_path), [F1, F2, F3], {F1: 1})


def test_without_a_record_recovery_scans_from_the_first_file(tmp_path: Path) -> None:
    assert scan_start(record_in(tmp_path), [F2, F3]) == F2


def test_a_record_naming_a_file_missing_from_the_index_is_an_error(tmp_path: Path) -> None:
    record_in(tmp_path).write(F1)
    with pytest.raises(CheckpointError, match="not in the relay index") as caught:
        scan_start(record_in(tmp_path), [F2, F3])
    assert "refetch" in caught.value.hint


def test_an_empty_relay_index_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="no file"):
        CheckpointTracker(record_in(tmp_path), [])


# --- the record file -------------------------------------------------------------------------


def test_the_record_is_one_line_with_a_crc32(tmp_path: Path) -> None:
    record_in(tmp_path).write(F2)
    raw = (tmp_path / "relay.checkpoint").read_bytes()
    body = f"binlake-checkpoint 1 {F2}"
    assert raw == f"{body} {zlib.crc32(body.encode()):08x}\n".encode()
    assert decode_record(encode_record(F3)) == F3


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\xff\xfe",
        b"binlake-checkpoint 1 relay.000002 00000000\n",
        b"binlake-checkpoint 2 relay.000002 00000000\n",
        b"something else entirely\n",
        encode_record(F2).rstrip(b"\n"),
        encode_record(F2).replace(b"000002", b"000003"),
    ],
    ids=["empty", "binary", "bad-crc", "version", "foreign", "no-newline", "edited"],
)
def test_a_damaged_record_is_a_typed_error(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "relay.checkpoint"
    path.write_bytes(raw)
    with pytest.raises(CheckpointRecordError) as caught:
        CheckpointRecord(path).read()
    assert caught.value.file == str(path)
    assert "delete" in caught.value.hint


def test_a_leftover_temp_record_from_a_crash_is_ignored(tmp_path: Path) -> None:
    record = record_in(tmp_path)
    record.write(F1)
    (tmp_path / "relay.checkpoint.tmp").write_bytes(b"half a rec")
    assert record.read() == F1
    record.write(F2)
    assert record.read() == F2
