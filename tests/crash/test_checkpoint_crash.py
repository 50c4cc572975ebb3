"""kill -9 while the checkpoint is being recorded (and in ``cut`` mode a power cut after it:
tests/cut_modes.py): the record is the old or the new checkpoint (the old one when the
cut undid a rename not yet made durable), never a mix; it stays a lower bound (nothing before
it is pending); recovery rebuilds the counts from it and reaches the checkpoint the crashed
process had computed."""

from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path

import pytest
from storage_driver import CHECKPOINT_OPS, FIRST_RELAY_FILE, apply_checkpoint_op, run_driver

from binlake.storage.checkpoint import CheckpointRecord, CheckpointTracker, scan_start
from cut_modes import CUT_MODES, Ground


@dataclass(frozen=True)
class RecordWrite:
    """The n-th record write of the schedule, as a run without crash sees it."""

    old: str | None
    new: str
    files: tuple[str, ...]
    pending: dict[str, int]


def record_writes(tmp_path: Path) -> list[RecordWrite]:
    """Run the driver's schedule in this process (no crash armed), noting each record write."""
    record = CheckpointRecord(tmp_path / "model.checkpoint")
    tracker = CheckpointTracker(record, [FIRST_RELAY_FILE])
    writes: list[RecordWrite] = []
    for op, file, count in CHECKPOINT_OPS:
        old = record.read()
        apply_checkpoint_op(tracker, op, file, count)
        if record.read() != old:
            pending = {name: tracker.pending(name) for name in tracker.files}
            writes.append(RecordWrite(old, tracker.checkpoint, tracker.files, pending))
    return writes


POINTS_BEFORE_DURABLE = [
    "checkpoint_before_record",
    "durable_after_temp_write",
    "durable_after_temp_fsync",
]
CASES = [
    (point, n) for point in [*POINTS_BEFORE_DURABLE, "durable_after_rename"] for n in (1, 2, 3)
]


def test_the_schedule_writes_the_record_three_times(tmp_path: Path) -> None:
    writes = record_writes(tmp_path)
    assert [w.new for w in writes] == ["relay.000003", "relay.000004", "relay.000005"]
    result = run_driver("checkpoint", tmp_path / "relay.checkpoint")
    assert result.returncode == 0, result.stderr
    assert CheckpointRecord(tmp_path / "relay.checkpoint").read() == "relay.000005"


@pytest.mark.parametrize("ground", CUT_MODES, indirect=True)
@pytest.mark.parametrize(("point", "n"), CASES, ids=[f"{p}:{n}" for p, n in CASES])
def test_kill_while_recording_leaves_a_lower_bound_and_recovery_catches_up(
    tmp_path: Path, ground: Ground, point: str, n: int
) -> None:
    write = record_writes(tmp_path)[n - 1]
    folder = ground.folder("state")
    folder.mkdir()
    ground.settle()
    record = CheckpointRecord(folder / "relay.checkpoint")
    result = run_driver("checkpoint", record.path, f"{point}:{n}")
    assert result.returncode == -signal.SIGKILL, result.stderr
    ground.crash()

    recorded = record.read()
    made_durable = point not in POINTS_BEFORE_DURABLE and not ground.cutting
    assert recorded == (write.new if made_durable else write.old)
    start = scan_start(record, write.files)
    assert all(write.pending[file] == 0 for file in write.files[: write.files.index(start)]), (
        "the recorded checkpoint must be a lower bound: nothing before it pending"
    )

    # Recovery: counts rebuilt by scanning from the record, never read from disk.
    rebuilt = {f: c for f, c in write.pending.items() if c}
    tracker = CheckpointTracker(record, write.files, rebuilt)
    assert tracker.checkpoint == write.new
    assert record.read() == write.new
    assert all(write.pending[f] == 0 for f in tracker.purgeable())
