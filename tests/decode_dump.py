"""Every event and row of the byte fixtures, decoded, as text, and the relay log the writer
makes of them, as bytes: run in a subprocess by tests/unit/test_compiled.py once compiled and
once with ``BINLAKE_PURE_PYTHON=1``, whose outputs must be identical. Prints binlake's mode on
stderr, the dump on stdout.

    PYTHONPATH=src:dev:tests python tests/decode_dump.py
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path

from binlake.binlog.stream import EventStream
from binlake.binlog.transactions import TransactionGrouper
from binlake.compiled import describe
from binlake.relay.writer import RelayLogWriter
from binlog_builder import LogBuilder
from binlog_fixtures import TYPES_BINLOG, decoded_changes, load_expected, strict
from relay_testing import split_events

# A payload's ``type_code: int = EventType.X`` default: an IntEnum in pure Python, the plain int
# in a compiled (mypyc) class, which stores an ``int`` field as an int; equal either way.
INT_ENUM_REPR = re.compile(r"<EventType\.\w+: (\d+)>")


def built_log() -> LogBuilder:
    log = LogBuilder().header()
    log.transaction(statements=2, xid=7)
    log.ddl()
    log.transaction(statements=1)
    log.rotate()
    return log


def dump(binlog: bytes) -> list[str]:
    lines = []
    events = list(EventStream(binlog))
    grouper = TransactionGrouper()
    for event in events:
        payload = INT_ENUM_REPR.sub(r"\1", repr(event.payload))
        lines.append(f"{event.offset} {event.end_offset} {event.header!r} {payload}")
        group = grouper.feed(event)
        if group is not None:
            lines.append(f"group {group.kind} {group.gtid} {group.start_offset} {group.xid}")
    return lines


def relay_dump(log: LogBuilder) -> list[str]:
    """The relay file the writer makes of ``log``'s events as received, from the end of its
    own header (which holds the time): each event's position, and the bytes in hex."""
    with tempfile.TemporaryDirectory() as tmp:
        writer = RelayLogWriter.open(Path(tmp))
        start = writer.position.offset
        lines = []
        for event in split_events(log):
            lines.append(f"relay {writer.position.offset}")
            writer.append(event, crc_checked=True)
        writer.close()
        lines.append((Path(tmp) / writer.position.file).read_bytes()[start:].hex())
    return lines


def main() -> None:
    print(describe(), file=sys.stderr)
    _, hints = load_expected()
    binlog = TYPES_BINLOG.read_bytes()
    for line in [*dump(binlog), *dump(built_log().bytes()), *relay_dump(built_log())]:
        print(line)
    for offset, change in decoded_changes(binlog, hints):
        print(offset, json.dumps(strict(change), sort_keys=True))


if __name__ == "__main__":
    main()
