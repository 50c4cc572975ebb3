"""The relay log's transactions with their source positions and the tables they touch.

Read-only, and safe beside a live receiver (no lock, no recovery): the newest relay file may end
with a partial event or an open transaction, which simply end what is known so far; damage in
any other file is a typed ``LogCorruptionError``. Positions come from the relay log itself, with
the rules of ``binlake.relay.restart.SourceTracker`` (each file's context preamble names the
source position it starts at), never from a separate file.

``RelayFollower`` reads forward from a source position and, on each ``refresh``, only what was
appended since (it resumes at the last complete group with the saved format context).
``status`` uses it once; ``verify`` polls it while it waits for the applier.

Which tables a transaction touches: the TABLE_MAP events inside it (row-based replication). A
standalone statement (DDL: ALTER, TRUNCATE, DROP, RENAME...) has no table map; it counts as
touching every table whose name occurs in its text (except a plain CREATE TABLE, which changes no
rows), and a DROP DATABASE every table of that database: a superset, so a check built on it can
only be cautious, never wrong.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from binlake.binlog.codec import BinlogEvent
from binlake.binlog.errors import BinlogFormatError
from binlake.binlog.events import QueryEvent
from binlake.binlog.format import FormatContext
from binlake.binlog.names import TableName
from binlake.binlog.stream import EventStream
from binlake.binlog.tablemap import TableMap
from binlake.binlog.transactions import EventGroup, GroupKind, TransactionGrouper
from binlake.errors import LogCorruptionError
from binlake.position import SourcePosition, at_or_before, before
from binlake.relay import INDEX_NAME
from binlake.relay.restart import OWN_FORMAT_DESCRIPTION_OFFSET, SourceTracker
from binlake.storage.binlog_file import BinlogFileReader
from binlake.storage.index import LogIndex


@dataclass(frozen=True, slots=True)
class RelayTransaction:
    """One complete transaction (or standalone statement) of the relay log."""

    #: The source position right after it.
    end: SourcePosition
    #: The source's header timestamp of its last event (seconds since the epoch).
    timestamp: int
    #: The table of every TABLE_MAP inside it.
    tables: frozenset[TableName]
    #: The text of a standalone statement (DDL); None for row transactions.
    statement: str | None
    relay_file: str
    #: Offset in ``relay_file`` right after it.
    relay_offset: int

    def touches(self, table: TableName) -> bool:
        """Whether it may change ``table``; a superset for statements."""
        if table in self.tables:
            return True
        if self.statement is None:
            return False
        return statement_touches(self.statement, table)


_LEADING_COMMENTS = re.compile(r"^(\s+|/\*(?!!).*?\*/|--[^\n]*\n|#[^\n]*\n)*", re.DOTALL)


def _mentions(text: str, name: str) -> bool:
    return re.search(r"(?<![\w$])" + re.escape(name.lower()) + r"(?![\w$])", text) is not None


def statement_touches(statement: str, table: TableName) -> bool:
    """Whether a standalone statement may change ``table``'s rows or columns: a DROP DATABASE of
    its database, any statement naming it except a plain CREATE TABLE (which creates an empty
    table, or nothing with IF NOT EXISTS). A superset: naming is enough."""
    db, name = table.database, table.table
    text = _LEADING_COMMENTS.sub("", statement.lower(), count=1)
    words = text.split(None, 3)
    if words[:2] in (["drop", "database"], ["drop", "schema"]):
        return _mentions(text, db)
    if words[:2] == ["create", "table"] and not _mentions(text, "select"):
        return False
    return _mentions(text, name)


@dataclass(frozen=True, slots=True)
class RelayFile:
    name: str
    size: int
    #: Where in the source the file begins (its context preamble); None when it has none.
    start: SourcePosition | None


def relay_files(relay_dir: Path) -> list[RelayFile]:
    """The files the relay index lists, oldest first, with their sizes and start positions.
    Empty when there is no relay log yet."""
    index = LogIndex(relay_dir / INDEX_NAME)
    if not index.exists():
        return []
    out = []
    for name in index.names():
        path = relay_dir / name
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            continue  # purged between reading the index and here
        out.append(RelayFile(name, size, _file_start(path)))
    return out


def _file_start(path: Path) -> SourcePosition | None:
    """The source position a relay file starts at: what its control events before the first
    transaction say (the preamble, or the stream's ROTATE in the very first file)."""
    tracker = SourceTracker()
    with path.open("rb") as f, BinlogFileReader(f, path.name) as reader:
        try:
            for group in reader.groups():
                if group.is_transaction:
                    break
                if group.events[0].offset != OWN_FORMAT_DESCRIPTION_OFFSET:
                    tracker.on_group(group)
        except BinlogFormatError:
            pass  # a header still being written: no known start yet
    return tracker.position


@dataclass
class _ScanCursor:
    """Where the follower stands: a file, the offset after its last complete group, the
    format context in force there, and the source tracker at that point."""

    file: str
    offset: int
    ctx: FormatContext | None
    tracker: SourceTracker


@dataclass
class RelayFollower:
    """The relay log's transactions after ``after`` (None: from the oldest file), kept in order.

    ``keep`` decides which transactions are stored (all by default); ``end`` always advances.
    """

    relay_dir: Path
    after: SourcePosition | None = None
    keep: Callable[[RelayTransaction], bool] | None = None
    transactions: list[RelayTransaction] = field(default_factory=list)
    #: Source position after the last complete group read (None: nothing read yet).
    end: SourcePosition | None = None
    #: Timestamp of the last complete transaction read.
    end_timestamp: int | None = None
    #: The first source position the scanned files cover (None: from the very beginning).
    coverage_start: SourcePosition | None = None
    _cursor: _ScanCursor | None = None

    def refresh(self) -> None:
        """Read what the relay log gained since the last call."""
        files = relay_files(self.relay_dir)
        names = [f.name for f in files]
        if self._cursor is None or self._cursor.file not in names:
            self._restart(files)
        if self._cursor is None:
            return
        first = names.index(self._cursor.file)
        for i in range(first, len(names)):
            cursor = self._cursor
            if cursor is None:
                return  # a file was purged under us: start over at the next refresh
            if cursor.file != names[i]:
                cursor = self._cursor = _ScanCursor(names[i], 0, None, cursor.tracker)
            self._read_file(cursor, newest=i == len(names) - 1)

    def _restart(self, files: list[RelayFile]) -> None:
        """Start at the newest file beginning at or before ``after``; forget what was read."""
        self.transactions.clear()
        self.end = self.end_timestamp = None
        self._cursor = None
        if not files:
            return
        chosen = files[0]
        for candidate in files:
            if candidate.start is not None and at_or_before(candidate.start, self.after):
                chosen = candidate
        self.coverage_start = chosen.start
        self._cursor = _ScanCursor(chosen.name, 0, None, SourceTracker())

    def _read_file(self, cursor: _ScanCursor, *, newest: bool) -> None:
        path = self.relay_dir / cursor.file
        grouper = TransactionGrouper()
        try:
            with path.open("rb") as f, BinlogFileReader(f, path.name) as reader:
                for group in _groups(reader, cursor, grouper):
                    self._follow(group, cursor)
            if grouper.in_group and not newest:
                raise LogCorruptionError(
                    "the relay file ends inside a transaction but a newer file follows it",
                    file=cursor.file,
                    offset=grouper.open_events[0].offset,
                )
        except FileNotFoundError:
            self._cursor = None  # purged under us: start over at the next refresh
        except BinlogFormatError as error:
            if not newest:
                raise LogCorruptionError(
                    f"the relay log is damaged: {error.message}",
                    file=cursor.file,
                    offset=error.offset,
                    event_type=error.event_type,
                    hint="run `binlake binlog recover` on the relay folder while binlake is "
                    "stopped",
                ) from None
            # the newest file's tail is still being written: what follows is not known yet

    def _follow(self, group: EventGroup, cursor: _ScanCursor) -> None:
        """Move the cursor past ``group``; keep it when it is a transaction after ``after``."""
        events = group.events
        cursor.offset = group.end_offset
        cursor.ctx = _ctx_after(group, cursor.ctx)
        if events[0].offset == OWN_FORMAT_DESCRIPTION_OFFSET:
            return  # binlake's own FORMAT_DESCRIPTION, not a source event
        cursor.tracker.on_group(group)
        position = cursor.tracker.position
        if position is None:
            return
        self.end = position
        if group.kind in (GroupKind.CONTROL, GroupKind.ROLLBACK):
            return
        self.end_timestamp = events[-1].header.timestamp
        if not before(self.after, position):
            return
        txn = _transaction(group, position, cursor)
        if self.keep is None or self.keep(txn):
            self.transactions.append(txn)

    def touching(
        self,
        table: TableName,
        after: SourcePosition | None,
        until: SourcePosition,
        *,
        clean_before_coverage: bool = False,
    ) -> bool | None:
        """Whether a transaction in ``(after, until]`` may touch ``table``; None when the relay
        log cannot say: it does not reach ``until`` yet, or it no longer holds ``after`` (older
        files purged) and ``clean_before_coverage`` is not given."""
        if before(self.end, until):
            return None
        if before(after, self.coverage_start) and not clean_before_coverage:
            return None
        if before(after, self.after):
            return None  # not scanned: the follower started later
        return any(
            before(after, t.end) and at_or_before(t.end, until) and t.touches(table)
            for t in self.transactions
        )


def _groups(
    reader: BinlogFileReader, cursor: _ScanCursor, grouper: TransactionGrouper
) -> Iterator[EventGroup]:
    """The complete groups of a file after ``cursor.offset`` (resumed with its saved context)."""
    if cursor.offset == 0 or cursor.ctx is None:
        events: Iterator[BinlogEvent] = reader.events()
        skip_to = cursor.offset
    else:
        events = _resumed(reader, cursor.offset, cursor.ctx)
        skip_to = 0
    for event in events:
        if event.offset < skip_to:
            continue
        group = grouper.feed(event)
        if group is not None:
            yield group


def _resumed(reader: BinlogFileReader, offset: int, ctx: FormatContext) -> Iterator[BinlogEvent]:
    """Events from ``offset`` decoded in ``ctx`` (offsets made absolute again)."""
    stream = EventStream(memoryview(reader.buf)[offset:], ctx=ctx, expect_magic=False)
    try:
        for event in stream:
            yield BinlogEvent(event.offset + offset, event.header, event.payload, event.raw)
    except BinlogFormatError as error:
        error.offset = offset + (stream.last_good_offset if error.offset is None else error.offset)
        raise error.with_location(file=reader.name) from None


def _ctx_after(group: EventGroup, ctx: FormatContext | None) -> FormatContext | None:
    for event in group.events:
        if isinstance(event.payload, FormatContext):
            ctx = event.payload
    return ctx


def _transaction(
    group: EventGroup, position: SourcePosition, cursor: _ScanCursor
) -> RelayTransaction:
    tables = frozenset(e.payload.name for e in group.events if isinstance(e.payload, TableMap))
    statement = None
    if group.kind is GroupKind.STATEMENT:
        texts = [e.payload.text for e in group.events if isinstance(e.payload, QueryEvent)]
        statement = "\n".join(texts)
    return RelayTransaction(
        end=position,
        timestamp=group.events[-1].header.timestamp,
        tables=tables,
        statement=statement,
        relay_file=cursor.file,
        relay_offset=group.end_offset,
    )
