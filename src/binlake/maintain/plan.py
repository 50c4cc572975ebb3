"""Which maintenance steps a table needs, from its health and ``[maintenance]``. Pure.

The steps, in the order they run (each is one Iceberg commit, or file deletions only):

1. ``compact``: delete files per data file at or over ``delete_files_per_data_file`` (and at
   least one delete file; dangling ones, which apply to no data file, are not counted), or
   ``small_files`` data files under ``small_file_bytes``: the small files are folded and the
   files with ``delete_ratio`` of their rows deleted rewritten, the rest left as it is; on a
   table with equality deletes (an ``[applier] deletes = "equality"`` table, or one written
   before position deletes) every data file a delete reaches is rewritten (``whole``), the
   only way to rid the table of them. When the mostly deleted files' live rows exceed
   ``compaction_max_rows``, the compaction folds the small files only, and
2. ``purge``: rewrites as many of the mostly deleted files as the bound allows (``purged_files``;
   at least one), the rest left to the next rounds: a round moves a bounded number of rows, so
   the key index follows it by a catch-up, not a rebuild (``binlake.lake.write.key_positions``);
3. ``prune``: the table has dangling delete files, or is compacted (which leaves the delete
   files it applied in the table: equality deletes whose sequence number is not above the
   rewritten files' one apply to none of them);
4. ``deletes``: ``position_delete_files`` position-delete files or more: merged (one per
   partition);
5. ``manifests``: the current snapshot has ``manifests`` manifests or more;
6. ``expire``: snapshots older than ``snapshot_max_age_s`` beyond the newest
   ``keep_snapshots`` (the applied position's snapshot is kept by its tag, whatever the bound);
7. ``orphans``: files older than ``orphan_min_age_s`` that no snapshot references, when the
   caller says it is due (``orphans_due``): a listing of the table's folder, which grows with
   its files, and a file becomes removable only ``orphan_min_age_s`` (at least a day) after it
   was written. ``binlake maintain`` runs it every time; the rounds inside ``binlake
   replicate`` (``binlake.maintain.schedule``) once per ``orphans_every_s`` per table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

from binlake.config.maintenance import MaintenanceConfig
from binlake.lake.tables.maintenance import TableHealth


class Step(StrEnum):
    COMPACT = "compact"
    PURGE = "purge"
    PRUNE = "prune"
    DELETES = "deletes"
    MANIFESTS = "manifests"
    EXPIRE = "expire"
    ORPHANS = "orphans"


@dataclass(frozen=True)
class Planned:
    step: Step
    #: Why it runs: the numbers that tripped its threshold.
    reason: str
    #: A compaction of every data file a delete reaches (not only the small and mostly
    #: deleted ones): the table has equality deletes.
    whole: bool = False
    #: A compaction of the small files only: the mostly deleted ones are the purge's.
    small_only: bool = False
    #: A purge: the most mostly deleted files it rewrites.
    files: int | None = None


def plan_compaction(health: TableHealth, config: MaintenanceConfig) -> Planned | None:
    """A compaction when the thresholds trip; of every data file a delete reaches (``whole``)
    when the table has equality deletes, else of the small and mostly deleted files."""
    deletes, data = health.delete_files, health.data_files
    if deletes and deletes >= config.delete_files_per_data_file * max(data, 1):
        reason = (
            f"{deletes} delete files for {data} data files "
            f"(threshold {config.delete_files_per_data_file:g} per data file)"
        )
    elif health.small_files >= config.small_files:
        reason = (
            f"{health.small_files} of {data} data files under {config.small_file_bytes:,} bytes "
            f"(threshold {config.small_files})"
        )
    else:
        return None
    if health.equality_deletes:
        reason += (
            f"; {health.equality_deletes} of them equality deletes (each applies to every older "
            "data file; some readers refuse them): every data file they reach is rewritten"
        )
    return Planned(Step.COMPACT, reason, whole=bool(health.equality_deletes))


def purged_files(rows: Sequence[int], max_rows: int) -> int:
    """How many of the mostly deleted files (``rows``: each one's live rows) one round rewrites
    so that their live rows stay within ``max_rows`` whichever of them Iceberg's plan meets
    first (``FoldPolicy.max_files``): as many as the largest ones allow, at least one (a file
    is never split: one over the bound is rewritten alone)."""
    total = 0
    for taken, live in enumerate(sorted(rows, reverse=True)):
        total += live
        if total > max_rows:
            return max(taken, 1)
    return len(rows)


def bound_compaction(
    compaction: Planned | None, health: TableHealth, config: MaintenanceConfig
) -> list[Planned]:
    """``compaction`` as it is, or, when the mostly deleted files' live rows exceed
    ``compaction_max_rows``, a fold of the small files only (none when there are none) and a
    purge of as many mostly deleted files as the bound allows. A whole compaction (equality
    deletes) is not bounded: it is the only way to rid the table of them."""
    if compaction is None or compaction.whole:
        return [] if compaction is None else [compaction]
    rows, bound = health.mostly_deleted_rows, config.compaction_max_rows
    if not bound or sum(rows) <= bound:
        return [compaction]
    files = purged_files(rows, bound)
    reason = (
        f"{len(rows)} files with {config.delete_ratio:g} of their rows deleted hold "
        f"{sum(rows):,} live rows (bound {bound:,} a round): {files} of them rewritten"
    )
    purge = Planned(Step.PURGE, reason, files=files)
    if not health.small_files:  # a fold of the small files only would fold nothing
        return [purge]
    folding = f"{compaction.reason}; the small files only, the mostly deleted ones purged next"
    return [replace(compaction, reason=folding, small_only=True), purge]


def plan_pruning(health: TableHealth, compacting: bool) -> Planned | None:
    if health.dangling_deletes:
        return Planned(Step.PRUNE, f"{health.dangling_deletes} dangling delete files")
    if compacting:
        return Planned(Step.PRUNE, "the delete files the compaction applied")
    return None


def plan_position_deletes(health: TableHealth, config: MaintenanceConfig) -> Planned | None:
    positions = health.delete_files - health.equality_deletes
    if positions >= config.position_delete_files:
        return Planned(
            Step.DELETES,
            f"{positions} position-delete files (threshold {config.position_delete_files})",
        )
    return None


def plan_manifests(health: TableHealth, config: MaintenanceConfig) -> Planned | None:
    if health.manifests >= config.manifests:
        return Planned(
            Step.MANIFESTS, f"{health.manifests} manifests (threshold {config.manifests})"
        )
    return None


def plan_expiry(health: TableHealth, config: MaintenanceConfig, now: datetime) -> Planned | None:
    oldest = health.oldest_snapshot
    if oldest is None or health.snapshots <= config.keep_snapshots:
        return None
    age = now - oldest
    if age < timedelta(seconds=config.snapshot_max_age_s):
        return None
    return Planned(
        Step.EXPIRE,
        f"{health.snapshots} snapshots, the oldest {age.total_seconds():,.0f} s old "
        f"(keeps {config.keep_snapshots}, expires after {config.snapshot_max_age_s:g} s)",
    )


def orphans_due(last_s: float | None, now_s: float, config: MaintenanceConfig) -> bool:
    """For a scheduled round at ``now_s``: whether a table's orphan listing is due, ``last_s``
    when it last ran (same clock; None: not yet this run, so it is)."""
    return last_s is None or now_s - last_s >= config.orphans_every_s


def plan_table(
    health: TableHealth, config: MaintenanceConfig, now: datetime, *, orphans_due: bool
) -> list[Planned]:
    """The steps ``health`` calls for, in running order (orphans last, when ``orphans_due``)."""
    compaction = plan_compaction(health, config)
    steps: list[Planned | None] = [*bound_compaction(compaction, health, config)]
    steps.append(plan_pruning(health, compaction is not None))
    steps.append(plan_position_deletes(health, config))
    steps.append(plan_manifests(health, config))
    steps.append(plan_expiry(health, config, now))
    if orphans_due:
        orphans = f"files unreferenced for {config.orphan_min_age_s:g} s or more"
        steps.append(Planned(Step.ORPHANS, orphans))
    return [s for s in steps if s is not None]
