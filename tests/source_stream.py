"""Replication streams built in memory, as a MariaDB primary sends them, and a receiver stand-in
that writes them into a relay log the way ``binlake receive`` does (preamble, tracker, rotation
with the source), for unit tests of the restart point.

A source is a list of binlog files built with ``LogBuilder`` (``end_log_pos`` relative to each
file). ``dump_events`` is what the server sends for a dump from file/offset: an artificial ROTATE,
the file's FORMAT_DESCRIPTION (end_log_pos 0 when not starting at 4), then the events; at each
real ROTATE the next file follows, preceded by its own artificial ROTATE (measured on 10.11).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from binlake.binlog.codec import encode_event
from binlake.binlog.constants import EventFlag
from binlake.binlog.events import GtidListEvent, RotateEvent
from binlake.relay.restart import SourceTracker, derive_restart_point
from binlake.relay.writer import RelayLogWriter
from binlog_builder import MARIADB_CTX, LogBuilder
from relay_testing import split_events

BASENAME = "mariadb-bin"


def file_name(number: int) -> str:
    return f"{BASENAME}.{number:06d}"


def artificial_rotate(file: str, position: int, server_id: int = 1) -> bytes:
    return encode_event(
        RotateEvent(position, file), MARIADB_CTX, server_id=server_id, flags=EventFlag.ARTIFICIAL
    )


@dataclass
class Source:
    """A MariaDB source with binlog files 1..n; transactions have GTIDs 0-1-1, 0-1-2, ..."""

    files: list[LogBuilder] = field(default_factory=list)
    seq: int = 0

    def new_file(self) -> LogBuilder:
        log = LogBuilder(seq_no=self.seq)
        log.add(log.ctx)
        log.add(GtidListEvent(((0, 1, self.seq),) if self.seq else (), 0))
        self.files.append(log)
        return log

    def transactions(self, count: int, statements: int = 2) -> None:
        log = self.files[-1] if self.files else self.new_file()
        for _ in range(count):
            log.transaction(statements=statements)
        self.seq = log.seq_no

    def rotate(self) -> None:
        """End the current file with a ROTATE and start the next one."""
        self.files[-1].rotate(file_name(len(self.files) + 1))
        self.new_file()

    def file_events(self, number: int) -> list[bytes]:
        return split_events(self.files[number - 1])

    def end(self) -> tuple[str, int]:
        return file_name(len(self.files)), len(self.files[-1].buf)

    def dump_events(self, number: int = 1, offset: int = 4) -> list[bytes]:
        """What a dump from (file ``number``, ``offset``) delivers, to the end of the last file."""
        out: list[bytes] = []
        for n in range(number, len(self.files) + 1):
            start = offset if n == number else 4
            events = self.file_events(n)
            starts = self.files[n - 1].offsets
            out.append(artificial_rotate(file_name(n), start))
            out += [ev for ev, at in zip(events, starts, strict=True) if at >= start]
        return out


def receive_into(
    folder: Path, events: list[bytes], *, max_file_size: int = 1 << 20, close: bool = True
) -> RelayLogWriter:
    """Append ``events`` the way the receiver does, syncing after every transaction."""
    tracker = SourceTracker(derive_restart_point(folder))
    writer = RelayLogWriter.open(
        folder, max_file_size=max_file_size, preamble=tracker.context_events
    )
    for event in events:
        writer.append(event)
        group = writer.last_group
        if group is None:
            continue
        tracker.on_group(group)
        last = group.events[-1]
        if isinstance(last.payload, RotateEvent) and last.header.log_pos:
            writer.rotate()
        elif group.is_transaction:
            writer.sync()
    if close:
        writer.close()
    return writer
