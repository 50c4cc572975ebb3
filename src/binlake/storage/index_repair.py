"""Repairing an index after a crash: leftover temp copies, the marker file, unlisted new files.

``plan_index_repair`` only reads; it returns what must change, or raises a typed error when the
index cannot be trusted (a listed file is missing and no marker explains it). ``apply_index_repair``
makes the planned changes durably, in an order that a crash can interrupt anywhere: the index is
rewritten first, files are deleted next, the marker is removed last, so running the repair again
finishes the job.

Rules (see storage/index.py for the protocols that leave these states):

- the index is missing but a temp copy of it survives (ours ``.index.tmp``, MySQL's
  ``.index_crash_safe``): the copy becomes the index. Otherwise temp copies are discarded: until
  the rename, the old version is the committed one.
- marker ``create NAME``: NAME in the index -> nothing left to do. Not in the index: adopted
  (appended) if it holds a complete transaction, removed if not.
- marker ``purge NAME...``: finished: removed from the index, then deleted.
- files named like the log's files (``base.NNNNNN``) with a higher number than the newest listed
  and no marker (a server that crashed between creating a file and listing it): the same rule as
  ``create``, newest first: removed while they hold no complete transaction, the rest adopted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from binlake.errors import FileAccessError, IndexFileError
from binlake.position import SEQUENCE_NAME, sequence_number
from binlake.storage.durable import fsync_dir
from binlake.storage.index import (
    IndexEntry,
    LogIndex,
    Marker,
    MarkerOp,
    index_lines,
    index_temp_copies,
    remove_file,
)
from binlake.storage.tail_scan import scan_file


@dataclass(frozen=True, slots=True)
class RepairAction:
    """One step of a repair, worded for after (``done``) and before (``planned``) it is made."""

    done: str
    planned: str

    def text(self, dry_run: bool) -> str:
        return f"index: {self.planned if dry_run else self.done}"


@dataclass
class IndexRepairPlan:
    index: LogIndex
    #: The index's lines as found (or as the surviving temp copy has them).
    original_lines: list[str]
    #: The index's lines after the repair.
    lines: list[str]
    entries: list[IndexEntry]
    actions: list[RepairAction] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    restore_from: Path | None = None
    stale_temps: list[Path] = field(default_factory=list)
    delete: list[Path] = field(default_factory=list)
    marker: Marker | None = None

    @property
    def changes_anything(self) -> bool:
        return bool(
            self.restore_from
            or self.stale_temps
            or self.delete
            or self.marker is not None
            or self.lines != self.original_lines
        )


def complete_transactions(path: Path) -> int:
    """How many complete transactions the valid prefix of the file at ``path`` holds."""
    return scan_file(path).transactions


def plan_index_repair(index: LogIndex) -> IndexRepairPlan:
    """What the repair of ``index`` must do; reads only. Raises when the index is untrustworthy."""
    temps = index_temp_copies(index.path)
    restore_from = temps[0] if temps and not index.exists() else None
    if not index.exists() and restore_from is None:
        raise IndexFileError("index file does not exist", file=str(index.path))
    lines = index_lines(restore_from if restore_from is not None else index.path)
    plan = IndexRepairPlan(index, list(lines), list(lines), index.entries(lines))
    if restore_from is not None:
        plan.restore_from = restore_from
        plan.actions.append(
            RepairAction(
                f"restored {index.path.name} from its temp copy {restore_from.name}",
                f"would restore {index.path.name} from its temp copy {restore_from.name}",
            )
        )
    marker_temp = index.marker_path.with_name(index.marker_path.name + ".tmp")
    for temp in [t for t in temps if t != restore_from] + [marker_temp]:
        if temp.exists():
            plan.stale_temps.append(temp)
            plan.actions.append(
                RepairAction(
                    f"removed {temp.name} (a new version never committed)",
                    f"would remove {temp.name} (a new version never committed)",
                )
            )
    plan.marker = index.read_marker()
    if plan.marker is not None:
        _plan_marker(plan, plan.marker)
    _plan_unlisted(plan)
    _check_entries(plan)
    return plan


def _set_lines(plan: IndexRepairPlan, lines: list[str]) -> None:
    plan.lines = lines
    plan.entries = plan.index.entries(lines)


def _plan_marker(plan: IndexRepairPlan, marker: Marker) -> None:
    if marker.op is MarkerOp.PURGE:
        gone = set(marker.names)
        _set_lines(plan, [e.line for e in plan.entries if e.name not in gone])
        plan.delete += [plan.index.folder / n for n in marker.names]
        names = ", ".join(marker.names)
        plan.actions.append(
            RepairAction(
                f"finished the interrupted purge of {names}",
                f"would finish the interrupted purge of {names}",
            )
        )
        return
    listed = {e.name for e in plan.entries}
    for name in marker.names:
        if name in listed:
            plan.notes.append(f"index: {name} was created and listed before the crash")
            continue
        _adopt_or_remove(plan, plan.index.folder / name, "created but not yet listed")
    plan.actions.append(
        RepairAction(
            f"removed the marker {plan.index.marker_path.name}",
            f"would remove the marker {plan.index.marker_path.name}",
        )
    )


def _adopt_or_remove(plan: IndexRepairPlan, path: Path, why: str) -> None:
    if not path.exists():
        plan.notes.append(f"index: {path.name} was never created")
        return
    count = complete_transactions(path)
    if count > 0:
        _set_lines(plan, [*plan.lines, plan.index.line_for(path.name, plan.entries)])
        plan.actions.append(
            RepairAction(
                f"adopted {path.name} ({why}; holds {count} complete transactions)",
                f"would adopt {path.name} ({why}; holds {count} complete transactions)",
            )
        )
    else:
        plan.delete.append(path)
        plan.actions.append(
            RepairAction(
                f"removed {path.name} ({why}; holds no complete transaction)",
                f"would remove {path.name} ({why}; holds no complete transaction)",
            )
        )


def _unlisted_successors(plan: IndexRepairPlan) -> list[Path]:
    """Files ``base.NNNNNN`` numbered after the newest listed file, oldest first."""
    base = plan.index.path.stem
    if plan.entries:
        match = SEQUENCE_NAME.match(plan.entries[-1].name)
        if match is None:
            return []
        base = match["base"]
    after = max((sequence_number(e.name) or 0 for e in plan.entries), default=0)
    handled = {p.name for p in plan.delete} | {e.name for e in plan.entries}
    found = []
    for path in plan.index.folder.iterdir():
        match = SEQUENCE_NAME.match(path.name)
        if (
            match
            and match["base"] == base
            and int(match["seq"]) > after
            and path.name not in handled
            and path.is_file()
        ):
            found.append(path)
    return sorted(found, key=lambda p: sequence_number(p.name) or 0)


def _plan_unlisted(plan: IndexRepairPlan) -> None:
    found = _unlisted_successors(plan)
    keep = len(found)
    while keep > 0 and complete_transactions(found[keep - 1]) == 0:
        keep -= 1
    for path in found[:keep]:
        _adopt_or_remove_forced(plan, path)
    for path in found[keep:]:
        plan.delete.append(path)
        plan.actions.append(
            RepairAction(
                f"removed {path.name} (not listed; holds no complete transaction)",
                f"would remove {path.name} (not listed; holds no complete transaction)",
            )
        )


def _adopt_or_remove_forced(plan: IndexRepairPlan, path: Path) -> None:
    """Adopt an unlisted file that precedes one holding transactions (never leave a gap)."""
    _set_lines(plan, [*plan.lines, plan.index.line_for(path.name, plan.entries)])
    plan.actions.append(
        RepairAction(
            f"adopted {path.name} (not listed; the log continues in it)",
            f"would adopt {path.name} (not listed; the log continues in it)",
        )
    )


def _check_entries(plan: IndexRepairPlan) -> None:
    deleted = {p.name for p in plan.delete}
    for entry in plan.entries:
        if entry.name in deleted:
            continue
        if not entry.path.is_file():
            where = f" (the index names {entry.line})" if entry.relocated else ""
            raise IndexFileError(
                f"index lists {entry.name} but {entry.path} does not exist{where}",
                file=str(plan.index.path),
                hint="restore the missing file, or remove its line from the index by hand if "
                "it was purged on purpose",
            )
    relocated = [e for e in plan.entries if e.relocated]
    if relocated:
        plan.notes.append(
            f"index: its lines name another folder ({relocated[0].line}, ...); "
            f"using the files of the same names in {plan.index.folder}"
        )


def apply_index_repair(plan: IndexRepairPlan) -> None:
    """Make the planned repair: index first, then deletions, then temp copies, marker last."""
    index = plan.index
    if plan.restore_from is not None:
        try:
            plan.restore_from.replace(index.path)
        except OSError as exc:
            raise FileAccessError(
                f"cannot restore the index: {exc.strerror}", file=str(index.path)
            ) from exc
        fsync_dir(index.folder, "index")
    if plan.lines != plan.original_lines:
        index.write_lines(plan.lines)
    for path in plan.delete + plan.stale_temps:
        remove_file(path)
    if plan.delete or plan.stale_temps:
        fsync_dir(index.folder, "index")
    if plan.marker is not None:
        index.remove_marker()
