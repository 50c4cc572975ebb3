"""Named crash points: every durable step has one, and every one has a kill -9 test.

Setting ``BINLAKE_CRASH_POINT=name[:n]`` makes the process SIGKILL itself (no cleanup, no
flush of Python buffers) the n-th time (default 1st) it passes the step called ``name``.
``POINTS`` is the one list of names; docs/recovery.md lists the same names with their tests, and
a unit test checks the two agree.
"""

from __future__ import annotations

import os
import signal
import threading

ENV_VAR = "BINLAKE_CRASH_POINT"

#: Every crash point: name -> the durable step it interrupts.
POINTS: dict[str, str] = {
    # durable file helpers (storage/durable.py)
    "durable_after_temp_write": "atomic replace: temp file written, not yet fsynced",
    "durable_after_temp_fsync": "atomic replace: temp file fsynced, not yet renamed",
    "durable_after_rename": "atomic replace: renamed over the target, folder not yet fsynced",
    # relay log writer (relay/writer.py)
    "relay_before_append": "relay log: before an event (or a received run of rows events) is "
    "appended",
    "relay_mid_event": "relay log: half of an event written (a torn write)",
    "relay_after_append": "relay log: an event (or a run) appended, not yet fsynced",
    "relay_before_fsync": "relay log: before the group fsync",
    "relay_after_fsync": "relay log: after the group fsync",
    "relay_rotate_before_index": "rotation: new file created, index not yet updated",
    "relay_rotate_after_index": "rotation: index updated, old file not yet closed",
    "relay_close_before_flag": "clean close: IN_USE flag not yet cleared",
    # purge (relay/writer.py, storage/index.py)
    "purge_before_index": "purge: marker written, index not yet updated",
    "purge_after_index": "purge: index updated, files not yet deleted",
    "purge_before_delete": "purge: before each file is deleted",
    # recovery (storage/recovery.py)
    "recover_after_truncate": "recovery: file truncated, IN_USE flag not yet cleared",
    # shadow-page state file (storage/shadow.py)
    "shadow_after_spare_write": "shadow page: spare page written, not yet fsynced",
    "shadow_after_prepare": "shadow page: spare page and prepared XID durable, pointer not flipped",
    "shadow_after_flip": "shadow page: pointer flipped, not yet fsynced",
    "shadow_after_rollback": "shadow page: prepared XID cleared (rollback), not yet fsynced",
    # checkpoint (storage/checkpoint.py)
    "checkpoint_before_record": "checkpoint: new checkpoint computed, not yet recorded",
    # receiver (source/receiver.py, source/identity.py)
    "receiver_identity_recorded": "receiver: source identity committed in source.state, "
    "relay log not yet opened",
    "receiver_after_sync": "receiver: a group of transactions fsynced, progress not yet reported",
    "receiver_before_source_rotate": "receiver: the source's ROTATE appended, relay file not yet "
    "rotated",
    "receiver_stop_before_close": "receiver: clean stop: relay log synced, IN_USE not yet cleared",
    # applier (apply/batch_apply.py, apply/purge.py, lake/tables/lake.py, lake/write/keyed.py)
    "apply_before_commit": "applier: batch built, no table committed yet",
    "apply_before_delta_commit": "applier: a table's row-delta files (new rows, position or "
    "equality deletes; or a change log's appended rows) stored in the warehouse, their commit "
    "not yet made (orphans if it never is)",
    "apply_between_tables": "applier: the first table of a multi-table batch committed, the "
    "others not yet",
    "apply_after_commits": "applier: every table of the batch committed, checkpoint counts not "
    "yet updated",
    "apply_during_ddl": "applier: between two schema statements of one DDL",
    "apply_before_backfill": "applier: an ALTER's schema changes made, its positioned commit (the "
    "backfill of the values it gave existing rows, or an empty append) not yet",
    "apply_during_purge": "applier: relay files older than the checkpoint being purged (before "
    "the purge starts)",
    # the key index (lake/write/keyed.py, keyindex/folder.py)
    "keyindex_after_delta_commit": "key index: a table's row delta committed (its position "
    "deletes named from the key index), the key index not yet moved to the new snapshot",
    "keyindex_after_rebuild_fsync": "key index: a rebuilt index written and fsynced under its "
    "temporary name, not yet renamed into place",
    "keyindex_after_rebuild_rename": "key index: a rebuilt index renamed into place, the folder "
    "not yet fsynced nor the older generation removed",
    # consistent cuts (apply/cuts.py)
    "cut_before_record": "cuts: a batch's tables committed, its consistent cut not yet recorded "
    "in the cuts table",
    "cut_after_record": "cuts: the cut recorded (one commit to the cuts table), the checkpoint "
    "counts not yet updated",
    "cut_after_prune": "cuts: the cuts table rewritten with the retained cuts, the in-memory "
    "list not yet",
    # the applied-position tag (lake/write/applied_tag.py)
    "lake_before_tag_move": "applier: a commit made by Spark SQL or a DataFrame write (its "
    "binlake-applied tag removed before it), the tag not yet set on it",
    # snapshot (storage/snapshot_plan.py, snapshot/copier.py)
    "snapshot_after_plan": "snapshot: tables to copy recorded in snapshot.plan, none copied yet",
    "snapshot_before_chunk": "snapshot: chunk files written by the tasks, not yet committed",
    "snapshot_after_chunk": "snapshot: chunk files committed with the copy's progress, the next "
    "not yet committed",
    "snapshot_during_cleanup": "snapshot: the first of a copy's uncommitted chunk files deleted, "
    "the others not yet",
    "snapshot_before_high": "snapshot: every chunk committed, the high position not yet read nor "
    "the copy marked done",
    "snapshot_after_replace": "re-snapshot: the old Iceberg table dropped, the first chunk not "
    "yet committed",
    "snapshot_before_done": "snapshot: a table's last chunk committed, not yet removed from "
    "snapshot.plan",
    # maintenance (maintain/runner.py)
    "maintain_after_compact": "maintain: a table's compaction committed (rewrite_data_files), "
    "its next step not yet run",
    "maintain_after_purge": "maintain: a table's purge committed (rewrite_data_files of at most "
    "compaction_max_rows live rows of mostly deleted files), its next step not yet run",
    "maintain_after_prune": "maintain: a table's dangling delete files removed (one RewriteFiles "
    "commit), its next step not yet run",
    "maintain_after_deletes": "maintain: a table's position-delete files merged (one "
    "RewritePositionDeleteFiles commit), its next step not yet run",
    "maintain_after_manifests": "maintain: a table's manifests rewritten, its next step not yet "
    "run",
    "maintain_after_protect": "maintain: the tags keeping the snapshots retained cuts name "
    "committed (binlake-cut-<id>, stale ones removed: one commit), the table's expiry not yet "
    "started",
    "maintain_after_expire": "maintain: a table's snapshots expired (and their files deleted), "
    "its orphan removal not yet run",
    "maintain_after_orphans": "maintain: a table's orphan files removed, the next table not yet "
    "maintained",
}

_armed: tuple[str, int] | None = None
_passes: dict[str, int] = {}
#: Passes are counted from several threads (a batch's commit workers).
_passes_lock = threading.Lock()
_loaded = False


class UnknownCrashPointError(ValueError):
    """The environment names a point that does not exist: a typo would silently test nothing."""


def _load() -> None:
    global _armed, _loaded
    _loaded = True
    spec = os.environ.get(ENV_VAR, "").strip()
    if not spec:
        _armed = None
        return
    name, _, count = spec.partition(":")
    if name not in POINTS:
        raise UnknownCrashPointError(f"{ENV_VAR}={spec!r}: no crash point named {name!r}")
    _armed = (name, int(count) if count else 1)


def reset() -> None:
    """Re-read the environment and forget pass counts (for tests that arm points in-process)."""
    global _loaded
    _loaded = False
    _passes.clear()


def should_crash(name: str) -> bool:
    """Count a pass through ``name``; true when this pass is the armed one. Disarmed (the
    normal run: some pass once per event) it returns at once; a name missing from ``POINTS`` is
    refused when armed, and ``tests/unit/test_crashpoint_docs.py`` checks every name in the
    code."""
    if _loaded and _armed is None:
        return False
    if not _loaded:
        _load()
    if _armed is None or _armed[0] != name:
        if name not in POINTS:
            raise UnknownCrashPointError(f"crash point {name!r} is not registered")
        return False
    with _passes_lock:
        _passes[name] = _passes.get(name, 0) + 1
        return _passes[name] == _armed[1]


def armed() -> bool:
    """Whether any crash point is armed in this process (a caller that passes several points
    per step in one go passes them one at a time then, as the per-event path does)."""
    if not _loaded:
        _load()
    return _armed is not None


def die() -> None:
    """SIGKILL this process now: what a power cut or kill -9 does, minus the page cache loss."""
    os.kill(os.getpid(), signal.SIGKILL)


def crash_point(name: str) -> None:
    """Mark a durable step; dies here when the environment arms this point for this pass."""
    if _loaded and _armed is None:
        return
    if should_crash(name):
        die()
