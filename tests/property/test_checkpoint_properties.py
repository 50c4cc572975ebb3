"""Properties of the relay-log checkpoint under any interleaving of rotation, appends and
(out-of-order) durability: it only moves forward, it is recorded whenever it moves, nothing
before it is pending, purge never offers a file that recovery could need, and a restart that
rebuilds the counts from the record reaches the same checkpoint."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from binlake.storage.checkpoint import CheckpointRecord, CheckpointTracker

OPS = st.lists(
    st.tuples(
        st.sampled_from(["rotate", "append", "durable", "purge"]),
        st.integers(min_value=0, max_value=1000),
        st.integers(min_value=1, max_value=4),
    ),
    max_size=40,
)


def relay_name(n: int) -> str:
    return f"relay.{n:06d}"


def apply(tracker: CheckpointTracker, op: str, pick: int, count: int) -> None:
    files = tracker.files
    if op == "rotate":
        tracker.on_file_added(relay_name(int(files[-1].rsplit(".", 1)[1]) + 1))
    elif op == "purge":
        purged = tracker.purgeable()
        assert all(tracker.pending(f) == 0 for f in purged)
        tracker.on_files_purged(purged)
    elif op == "append":
        for _ in range(count):
            tracker.on_transaction_appended(files[-1])
    else:
        pending = [f for f in files if tracker.pending(f)]
        if pending:
            file = pending[pick % len(pending)]  # any file, not only the oldest
            tracker.on_transactions_durable(file, min(count, tracker.pending(file)))


def check_invariants(tracker: CheckpointTracker, record: CheckpointRecord) -> None:
    files = list(tracker.files)
    position = files.index(tracker.checkpoint)
    first = files[0] == relay_name(1)
    assert all(tracker.pending(f) == 0 for f in files[:position])
    assert tracker.pending(tracker.checkpoint) > 0 or tracker.checkpoint == files[-1]
    assert tracker.recorded_checkpoint == tracker.checkpoint
    if record.read() is None:  # nothing recorded yet: the checkpoint is still the first file
        assert first and position == 0
    else:
        assert record.read() == tracker.checkpoint
    assert tracker.purgeable() == files[:position]


@settings(max_examples=200, deadline=None)
@given(ops=OPS)
def test_the_checkpoint_is_a_forward_only_lower_bound_under_any_interleaving(
    ops: list[tuple[str, int, int]],
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        record = CheckpointRecord(Path(folder) / "relay.checkpoint")
        tracker = CheckpointTracker(record, [relay_name(1)])
        previous = 0
        for op, pick, count in ops:
            apply(tracker, op, pick, count)
            check_invariants(tracker, record)
            number = int(tracker.checkpoint.rsplit(".", 1)[1])
            assert number >= previous
            previous = number

        # Restart: counts rebuilt from the files at and after the recorded checkpoint.
        files = tracker.files
        pending = {f: tracker.pending(f) for f in files if tracker.pending(f)}
        rebuilt = CheckpointTracker(CheckpointRecord(record.path), files, pending)
        assert rebuilt.checkpoint == tracker.checkpoint
        assert rebuilt.purgeable() == tracker.purgeable()
