"""What recovery needs to know about one log file: how far it is whole, and what its tail is.

``scan_file`` reads the file once (through ``BinlogFileReader``, so through a file object) and
returns ``FileFacts``: the end of the last complete transaction (``boundary``), the first bad
byte and whether it is a torn tail, the GTIDs of the complete transactions, and whether damage
that is followed by valid events still lies inside the file's last transaction
(``tail_damage``).

That last case is WL#5493's "body garbage" with a CRC32: a torn write of the last group can leave
one damaged event with whole, valid events of the same transaction after it. Such damage is
trimmed with its transaction only when every valid event after it belongs to that transaction
(no GTID, BEGIN, control event, or event after its XID/COMMIT). Damage followed by another
transaction is corruption.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from binlake.binlog.codec import BinlogEvent
from binlake.binlog.constants import IN_GROUP_TYPES, MAGIC, ChecksumAlg, EventType
from binlake.binlog.errors import BinlogFormatError, NotABinlogError
from binlake.binlog.events import QueryEvent
from binlake.binlog.format import FormatContext
from binlake.binlog.stream import (
    EventStream,
    ProblemKind,
    classify_problem,
    find_next_valid_event,
    is_whole_valid_event,
)
from binlake.binlog.transactions import TransactionGrouper
from binlake.errors import FileAccessError
from binlake.storage.binlog_file import BinlogFileReader

#: The longest file that can be a file creation cut short: magic + the largest header we know
#: (a FORMAT_DESCRIPTION is 100-260 bytes) with room to spare.
HEADER_ONLY_LIMIT = 1024


@dataclass
class FileFacts:
    name: str
    size: int
    in_use: bool
    #: End of the last complete group (transaction, statement or control event); 0 if none.
    boundary: int = 0
    #: End of the last whole, valid event.
    last_good_offset: int = 0
    events: int = 0
    #: Complete transactions and standalone statements (not control events).
    transactions: int = 0
    error: BinlogFormatError | None = None
    kind: ProblemKind | None = None
    #: The file ends (cleanly) inside a transaction.
    open_tail: bool = False
    #: Damage followed by valid events that all belong to the last transaction.
    tail_damage: bool = False
    #: Events that a trim at ``boundary`` removes (whole ones, plus one for a torn or bad one).
    tail_events: int = 0
    #: (gtid, start, end) of each complete group that has a GTID, in file order.
    gtids: list[tuple[str, int, int]] = field(default_factory=list)

    @property
    def has_format_description(self) -> bool:
        return self.events > 0

    @property
    def clean(self) -> bool:
        return self.error is None and not self.open_tail

    @property
    def torn(self) -> bool:
        """A torn tail: a partial or garbage last event, or a file ending inside a transaction."""
        return self.kind is ProblemKind.TORN_TAIL or (self.error is None and self.open_tail)

    @property
    def problem_offset(self) -> int:
        if self.error is not None and self.error.offset is not None:
            return self.error.offset
        return self.boundary

    def describe_problem(self) -> str:
        if self.error is None:
            return "the file ends inside a transaction"
        what = "torn tail" if self.kind is ProblemKind.TORN_TAIL else "corruption"
        if self.tail_damage:
            what = "damaged event inside the last transaction"
        return f"{what} at offset {self.problem_offset} ({self.error.message})"


def scan_file(path: Path) -> FileFacts:
    try:
        with path.open("rb") as f, BinlogFileReader(f, path.name) as reader:
            return _scan(reader)
    except OSError as exc:
        raise FileAccessError(f"cannot read: {exc.strerror}", file=str(path)) from exc


def _scan(reader: BinlogFileReader) -> FileFacts:
    facts = FileFacts(reader.name, len(reader.buf), reader.in_use)
    grouper = TransactionGrouper()
    try:
        for event in reader.events():
            facts.events += 1
            group = grouper.feed(event)
            if group is not None and group.is_transaction:
                facts.transactions += 1
            if group is not None and group.gtid is not None:
                facts.gtids.append((group.gtid, group.start_offset, group.end_offset))
    except BinlogFormatError as exc:
        facts.error = exc.with_location(file=reader.name)
    facts.last_good_offset = reader.last_good_offset
    facts.boundary = grouper.boundary if grouper.boundary is not None else 0
    facts.tail_events = len(grouper.open_events)
    facts.open_tail = grouper.in_group
    if facts.error is not None:
        ctx = reader.ctx if reader.ctx is not None else FormatContext.default()
        buf = memoryview(reader.buf)
        facts.kind = classify_problem(buf, facts.error, ctx)
        if facts.events == 0:
            facts.kind = _classify_header_damage(buf, facts.error)
        facts.tail_events += 1
        if facts.kind is ProblemKind.CORRUPTION and facts.error.offset is not None:
            after = _events_after_damage(
                buf, facts.error.offset, ctx, at_group_start=not grouper.in_group
            )
            if after is not None and facts.has_format_description:
                facts.tail_damage = True
                facts.tail_events += after
    return facts


def _classify_header_damage(buf: memoryview, error: BinlogFormatError) -> ProblemKind:
    """Damage in the FORMAT_DESCRIPTION itself (no format context yet to judge by).

    A crash while a file is being created leaves a short file whose header is partial or
    garbage. So the damage is a torn tail when the magic is right, the file is no longer than a
    header can be, and neither the FORMAT_DESCRIPTION nor anything after it is a whole event
    with a valid CRC32. Anything else (a foreign file, a damaged header in front of valid
    events) is corruption.
    """
    if isinstance(error, NotABinlogError) or len(buf) > HEADER_ONLY_LIMIT:
        return ProblemKind.CORRUPTION
    if is_whole_valid_event(buf, len(MAGIC)):
        return ProblemKind.CORRUPTION
    if find_next_valid_event(buf, len(MAGIC), ChecksumAlg.CRC32) is not None:
        return ProblemKind.CORRUPTION
    return ProblemKind.TORN_TAIL


def _events_after_damage(
    buf: bytes | memoryview, bad: int, ctx: FormatContext, *, at_group_start: bool
) -> int | None:
    """How many valid events follow the damage at ``bad``, if all of them belong to its group.

    None when the damage is followed by another group (or by more damage, or when there is no
    CRC32 to tell a valid event from garbage).
    """
    if ctx.checksum_alg != ChecksumAlg.CRC32:
        return None
    start = find_next_valid_event(buf, bad, ctx.checksum_alg)
    if start is None:
        return 0
    rest = memoryview(buf)[start:]
    stream = EventStream(rest, ctx=ctx, expect_magic=False)
    count = 0
    closed = False
    try:
        for event in stream:
            if closed or not _inside(event, first=count == 0 and at_group_start):
                return None
            closed = _closes(event)
            count += 1
    except BinlogFormatError as exc:
        if classify_problem(rest, exc, stream.ctx) is not ProblemKind.TORN_TAIL:
            return None
        count += 1
    return count


def _inside(event: BinlogEvent, first: bool) -> bool:
    """Whether ``event`` can belong to the group the damaged event was part of."""
    if event.header.type_code not in IN_GROUP_TYPES:
        return False
    payload = event.payload
    if isinstance(payload, QueryEvent):
        head = payload.query[:16].lstrip().upper()
        if head.startswith((b"BEGIN", b"XA START", b"XA BEGIN")):
            return first  # a MySQL transaction's BEGIN right after its damaged GTID
    return True


def _closes(event: BinlogEvent) -> bool:
    if event.header.type_code in (EventType.XID, EventType.XA_PREPARE):
        return True
    payload = event.payload
    return isinstance(payload, QueryEvent) and payload.keyword in ("COMMIT", "ROLLBACK")
