"""Helpers for relay-log and recovery tests: source events, relay folders, invariant checks.

The invariants checked by ``check_recovered_log`` are the ones every crash test ends with: the
index lists exactly the log files on disk (no dangling line, no stray file, no marker or temp
copy left), and every file is whole: no problem, it ends at a transaction boundary, IN_USE clear.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from binlake.binlog.constants import IN_USE_FLAG_FILE_OFFSET, EventFlag
from binlake.binlog.errors import BinlogFormatError
from binlake.binlog.events import MariaGtidEvent
from binlake.position import SEQUENCE_NAME
from binlake.relay.writer import RelayLogWriter
from binlake.storage.binlog_file import BinlogFileReader
from binlake.storage.index import read_index
from binlake.storage.tail_scan import FileFacts, scan_file
from binlog_builder import LogBuilder


def source_log(transactions: int, statements: int = 2) -> LogBuilder:
    """A source binlog: header (FDE, Gtid_list) then MariaDB transactions with seq 1..n."""
    log = LogBuilder().header()
    for _ in range(transactions):
        log.transaction(statements=statements)
    return log


def split_events(log: LogBuilder) -> list[bytes]:
    """The events of ``log`` as separate byte strings, as a replication stream delivers them."""
    raw = log.bytes()
    ends = [*log.offsets[1:], len(raw)]
    return [raw[start:end] for start, end in zip(log.offsets, ends, strict=True)]


def write_relay(
    folder: Path, events: Iterable[bytes], max_file_size: int = 1 << 20, close: bool = True
) -> RelayLogWriter:
    """Append ``events`` through a writer, syncing at the end (and closing it, by default)."""
    writer = RelayLogWriter.open(folder, max_file_size=max_file_size)
    for event in events:
        writer.append(event)
    writer.sync()
    if close:
        writer.close()
    return writer


def set_in_use(path: Path) -> None:
    """Set the IN_USE flag again, as a writer killed before its clean close leaves it."""
    with path.open("r+b") as f:
        f.seek(IN_USE_FLAG_FILE_OFFSET)
        flags = f.read(1)[0]
        f.seek(IN_USE_FLAG_FILE_OFFSET)
        f.write(bytes([flags | EventFlag.BINLOG_IN_USE]))


def crash_leftover(path: Path, tail: bytes = b"") -> None:
    """Make ``path`` look like a file whose writer died: IN_USE set, ``tail`` appended."""
    set_in_use(path)
    with path.open("ab") as f:
        f.write(tail)


def folder_hashes(folder: Path) -> dict[str, str]:
    """sha256 of every file in ``folder``: compared before/after to prove nothing was written."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file()
    }


def log_files_on_disk(folder: Path, basename: str) -> list[str]:
    return sorted(
        p.name
        for p in folder.iterdir()
        if (m := SEQUENCE_NAME.match(p.name)) is not None and m["base"] == basename
    )


def check_recovered_log(folder: Path, basename: str = "relay-bin") -> list[FileFacts]:
    """Assert the invariants after recovery; returns the scan of each indexed file."""
    index = folder / f"{basename}.index"
    listed = read_index(index)
    names = [p.name for p in listed]
    assert names == sorted(names), f"index out of order: {names}"
    assert names == log_files_on_disk(folder, basename), "index and files on disk disagree"
    leftovers = [p.name for p in folder.iterdir() if p.name.endswith((".marker", ".tmp"))]
    assert leftovers == [], f"repair left {leftovers}"
    scans = [scan_file(folder / name) for name in names]
    for s in scans:
        assert s.clean, f"{s.name}: {s.describe_problem()}"
        assert s.boundary == s.size, f"{s.name} ends at {s.size}, boundary {s.boundary}"
        assert not s.in_use, f"{s.name} still has IN_USE set"
    return scans


def gtid_seqs(folder: Path, basename: str = "relay-bin") -> list[int]:
    """The GTID sequence numbers of the complete transactions in the log, in log order."""
    seqs: list[int] = []
    for path in read_index(folder / f"{basename}.index"):
        with path.open("rb") as f, BinlogFileReader(f, path.name) as reader:
            try:
                for group in reader.groups():
                    first = group.events[0].payload
                    if isinstance(first, MariaGtidEvent):
                        seqs.append(first.seq_no)
            except BinlogFormatError:
                pass  # a damaged tail ends the list; callers check the files separately
    return seqs
