"""Crash recovery of a binlog folder (WL#5493): ours (the relay log) or a crashed server's.

``recover_log(folder)``:

1. repairs the index (temp copy, marker, unlisted new files: storage/index_repair.py);
2. scans the files still marked IN_USE, the newest file, and every file from ``scan_from`` (the
   caller's checkpoint file, MDEV-181) on;
3. in the newest file, finds the end of the last complete transaction and truncates there when
   the tail is torn (a partial or garbage event, a CRC mismatch inside the last transaction, or a
   transaction the file ends inside); a newest file without even a complete format description
   (an interrupted creation) is removed;
4. clears IN_USE (the designed in-place write of one byte) in every scanned file, with an fsync
   after the truncation and after the flag.

It refuses, writing nothing at all, when the damage is not a torn tail: corruption before the last
transaction or in an older file (``LogCorruptionError`` naming file and offset), an XID or COMMIT
with no open transaction (``OrphanEventError``), the same GTID twice among the scanned files
(``DuplicateTransactionError``), or an index that lists a missing file (``IndexFileError``).
Every decision is made before the first write, so ``dry_run`` and refusals leave the folder
byte-for-byte as it was. A crash during recovery is repaired by running it again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from binlake.binlog.constants import IN_USE_FLAG_FILE_OFFSET, EventFlag
from binlake.binlog.errors import OrphanEventError
from binlake.crashpoints import crash_point
from binlake.errors import DuplicateTransactionError, IndexFileError, LogCorruptionError
from binlake.storage.durable import fsync_fd, raise_os_error
from binlake.storage.index import IndexEntry, LogIndex, locate_index
from binlake.storage.index_repair import apply_index_repair, plan_index_repair
from binlake.storage.tail_scan import FileFacts, scan_file


@dataclass(frozen=True, slots=True)
class Trim:
    file: str
    offset: int
    removed_bytes: int
    removed_events: int
    reason: str


@dataclass(frozen=True, slots=True)
class _FileAction:
    entry: IndexEntry
    facts: FileFacts
    cut: int | None
    reason: str

    @property
    def writes(self) -> bool:
        return self.cut is not None or self.facts.in_use


@dataclass
class RecoveryReport:
    folder: Path
    index: Path
    dry_run: bool
    lines: list[str] = field(default_factory=list)
    trims: list[Trim] = field(default_factory=list)
    cleared_in_use: list[str] = field(default_factory=list)
    removed_files: list[str] = field(default_factory=list)
    scanned: list[str] = field(default_factory=list)
    index_changed: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.index_changed or self.trims or self.cleared_in_use or self.removed_files)


def recover_log(
    folder: Path,
    dry_run: bool = False,
    scan_from: str | None = None,
    *,
    index_name: str | None = None,
) -> RecoveryReport:
    """Repair the log in ``folder`` after a crash; see the module docstring."""
    index = LogIndex(locate_index(Path(folder), index_name))
    repair = plan_index_repair(index)
    report = RecoveryReport(Path(folder), index.path, dry_run)
    report.index_changed = repair.changes_anything
    report.lines += repair.notes + [a.text(dry_run) for a in repair.actions]
    entries = list(repair.entries)
    removals = _headless_newest(entries)
    actions = _plan_files(entries, scan_from)
    for entry in removals:
        verb = "would remove" if dry_run else "removed"
        report.lines.append(
            f"{verb} {entry.name}: it holds no complete format description "
            "(its creation was interrupted)"
        )
        report.removed_files.append(entry.name)
    _describe(actions, report)
    if not dry_run:
        apply_index_repair(repair)
        index.remove_files([e.name for e in removals])
        for action in actions:
            _apply(action)
    if not report.lines:
        report.lines.append("nothing to do")
    return report


def _headless_newest(entries: list[IndexEntry]) -> list[IndexEntry]:
    """Pop newest files without a whole FORMAT_DESCRIPTION (just the magic, or a torn header):
    nothing in them was ever complete."""
    removed: list[IndexEntry] = []
    while entries:
        facts = scan_file(entries[-1].path)
        if facts.has_format_description or (facts.error is not None and not facts.torn):
            break
        removed.append(entries.pop())
    return removed


def _targets(entries: list[IndexEntry], scan_from: str | None) -> list[int]:
    start = len(entries)
    if scan_from is not None:
        names = [e.name for e in entries]
        if scan_from not in names:
            raise IndexFileError(
                f"scan_from={scan_from!r} is not in the index",
                file=str(entries[0].path.parent) if entries else None,
            )
        start = names.index(scan_from)
    last = len(entries) - 1
    return [i for i, e in enumerate(entries) if i >= start or i == last or _in_use(e.path)]


def _in_use(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            head = f.read(IN_USE_FLAG_FILE_OFFSET + 1)
    except OSError as exc:
        raise_os_error(exc, path, "reading the header")
    return len(head) > IN_USE_FLAG_FILE_OFFSET and bool(
        head[IN_USE_FLAG_FILE_OFFSET] & EventFlag.BINLOG_IN_USE
    )


def _plan_files(entries: list[IndexEntry], scan_from: str | None) -> list[_FileAction]:
    actions: list[_FileAction] = []
    seen: dict[str, tuple[str, int]] = {}
    for i in _targets(entries, scan_from):
        entry = entries[i]
        facts = scan_file(entry.path)
        action = _decide(entry, facts, newest=i == len(entries) - 1)
        _check_duplicates(entry, facts, action.cut, seen)
        actions.append(action)
    return actions


def _decide(entry: IndexEntry, facts: FileFacts, newest: bool) -> _FileAction:
    error = facts.error
    if isinstance(error, OrphanEventError):
        raise error.with_location(file=entry.name)
    if facts.clean:
        return _FileAction(entry, facts, None, "")
    if newest and (facts.torn or facts.tail_damage):
        return _FileAction(entry, facts, facts.boundary, facts.describe_problem())
    offset = facts.problem_offset
    if newest:
        message = f"damage before the last transaction: {facts.describe_problem()}"
    else:
        message = f"damage in a file that is not the newest: {facts.describe_problem()}"
    raise LogCorruptionError(
        message,
        file=entry.name,
        offset=offset,
        event_type=error.event_type if error is not None else None,
    )


def _check_duplicates(
    entry: IndexEntry, facts: FileFacts, cut: int | None, seen: dict[str, tuple[str, int]]
) -> None:
    for gtid, start, end in facts.gtids:
        if cut is not None and end > cut:
            break
        if gtid in seen:
            first_file, first_offset = seen[gtid]
            raise DuplicateTransactionError(
                f"GTID {gtid} appears twice: here and in {first_file} at offset {first_offset}",
                file=entry.name,
                offset=start,
            )
        seen[gtid] = (entry.name, start)


def _describe(actions: list[_FileAction], report: RecoveryReport) -> None:
    dry = report.dry_run
    for action in actions:
        name = action.entry.name
        facts = action.facts
        report.scanned.append(name)
        flag = ""
        if facts.in_use:
            flag = "; would clear the IN_USE flag" if dry else "; IN_USE flag cleared"
            report.cleared_in_use.append(name)
        if action.cut is None:
            report.lines.append(f"{name}: clean{flag}")
            continue
        removed = facts.size - action.cut
        events = facts.tail_events
        verb = "would trim" if dry else "trimmed"
        report.lines.append(
            f"{verb} {removed} bytes ({events} events) from {name} at offset {action.cut}: "
            f"{action.reason}{flag}"
        )
        report.trims.append(Trim(name, action.cut, removed, events, action.reason))


def _apply(action: _FileAction) -> None:
    if not action.writes:
        return
    path = action.entry.path
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError as exc:
        raise_os_error(exc, path, "opening for recovery")
    try:
        if action.cut is not None:
            os.ftruncate(fd, action.cut)
            fsync_fd(fd, "recovery", path)
            crash_point("recover_after_truncate")
        if action.facts.in_use:
            clear_in_use(fd, path)
    except OSError as exc:
        raise_os_error(exc, path, "recovering")
    finally:
        os.close(fd)


def clear_in_use(fd: int, path: Path) -> None:
    """The designed in-place write: the FORMAT_DESCRIPTION's flag byte, then fsync.

    The CRC32 of a FORMAT_DESCRIPTION is computed with IN_USE cleared, so it stays valid.
    """
    (flags,) = os.pread(fd, 1, IN_USE_FLAG_FILE_OFFSET)
    if flags & EventFlag.BINLOG_IN_USE:
        os.pwrite(fd, bytes([flags & ~EventFlag.BINLOG_IN_USE & 0xFF]), IN_USE_FLAG_FILE_OFFSET)
        fsync_fd(fd, "recovery", path)
