"""Where the receiver resumes, derived from the relay log alone (WL#4621).

Every relay event keeps the source's ``end_log_pos``, so the source offset after an event is in
the event itself; the source *file* name comes from ROTATE events: the artificial ROTATE the server
sends when a dump starts, and the ROTATE that ends each source binlog. The GTID state comes from
the GTID_LIST (MariaDB) or PREVIOUS_GTIDS (MySQL) a stream starts with, plus every transaction's
GTID after it.

So that every relay file can say all this on its own (older relay files may be purged), each new
relay file carries a *context preamble* in its header, written and fsynced with it: after
binlake's FORMAT_DESCRIPTION and the copy of the source's, an artificial ROTATE naming the source
file and offset where the file begins, and a GTID_LIST / PREVIOUS_GTIDS holding the GTID state
there (docs/format.md, "Receiver context"). Both are control events: they are not transactions,
and readers that follow the stream (``SourceTracker``) simply find them consistent.

``SourceTracker`` follows events group by group (whole transactions only), both live, as the
receiver appends, and offline, over the recovered relay files (``derive_restart_point``); the two
use the same rules, so the restart point after a crash is what the live tracker had at the last
durable transaction boundary.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from binlake.binlog.codec import BinlogEvent, encode_event
from binlake.binlog.constants import MAGIC, EventFlag
from binlake.binlog.errors import BinlogFormatError
from binlake.binlog.events import (
    GtidListEvent,
    MariaGtidEvent,
    MysqlGtidEvent,
    PreviousGtidsEvent,
    RotateEvent,
)
from binlake.binlog.format import Flavor, FormatContext
from binlake.binlog.transactions import EventGroup, TransactionGrouper
from binlake.errors import DuplicateTransactionError, LogCorruptionError
from binlake.gtid import GtidState, MariaGtid, MariaGtidState, MysqlGtidSet
from binlake.position import SourcePosition, before
from binlake.relay import INDEX_NAME
from binlake.relay.runs import TransactionRun
from binlake.storage.binlog_file import BinlogFileReader
from binlake.storage.index import LogIndex

_ARTIFICIAL = int(EventFlag.ARTIFICIAL)
#: The relay log's own FORMAT_DESCRIPTION sits at this offset of every relay file.
OWN_FORMAT_DESCRIPTION_OFFSET = len(MAGIC)


@dataclass(frozen=True, slots=True)
class RestartPoint:
    """The end of the last complete transaction (or control event) in the relay log."""

    #: None: the relay log holds nothing from a source yet (first start).
    position: SourcePosition | None
    flavor: Flavor | None
    #: None when the flavor is not known yet.
    gtid_state: GtidState | None
    source_server_id: int | None
    #: The relay file the point was read from (None when the relay log is empty).
    relay_file: str | None = None
    #: Complete transactions in the relay files read to derive it.
    transactions: int = 0

    @property
    def empty(self) -> bool:
        return self.position is None

    def describe(self) -> str:
        if self.position is None:
            return "nothing received yet"
        gtid = f", GTID state {self.gtid_state}" if self.gtid_state is not None else ""
        return f"source {self.position}{gtid}"


EMPTY = RestartPoint(None, None, None, None)


class SourceTracker:
    """Follows a replication stream one complete group at a time; see the module docstring."""

    def __init__(self, start: RestartPoint = EMPTY) -> None:
        #: The restart position: the furthest point the stream has reached.
        self.position = start.position
        #: Where the stream is now: the last ROTATE's file, the last event's end_log_pos there.
        self.stream = start.position
        self.flavor = start.flavor
        self.gtid_state = start.gtid_state
        self.server_id = start.source_server_id
        self.transactions = 0
        #: A GTID_LIST / PREVIOUS_GTIDS (or a start point) gave the whole state, not just deltas.
        self.gtid_base_known = start.gtid_state is not None

    def point(self, relay_file: str | None = None) -> RestartPoint:
        return RestartPoint(
            self.position,
            self.flavor,
            self.gtid_state,
            self.server_id,
            relay_file,
            self.transactions,
        )

    def on_group(self, group: EventGroup) -> None:
        """Take in one complete group (a transaction, a statement or a control event).

        Inside a transaction only its first event (the GTID) and the end_log_pos of its last
        event matter: no ROTATE, FORMAT_DESCRIPTION or GTID list occurs inside one, and the
        offsets grow within it.
        """
        events = group.events
        if group.is_transaction:
            self.transactions += 1
            self._on_event(events[0])
            if len(events) > 1:
                log_pos = events[-1].header.log_pos
                if log_pos and self.stream is not None:
                    self._advance(SourcePosition(self.stream.file, log_pos))
            return
        for event in events:
            self._on_event(event)

    def on_run(self, run: TransactionRun) -> None:
        """Take in a run of whole MariaDB transactions (``relay.runs``) at once: what
        ``on_group`` does for each of them, in order (their GTIDs and XIDs lie in the stream's
        current file; a GTID that repeats the one before it in its domain ends the run before
        it, so there is none to refuse here)."""
        if not run.transactions:
            return
        state = self._maria(None)
        self.transactions += run.transactions
        if run.server_id:
            self.server_id = run.server_id
        stream = self.stream
        if run.last_pos and stream is not None:
            self.stream = SourcePosition(stream.file, run.last_pos)
            furthest = SourcePosition(stream.file, run.max_pos)
            if before(self.position, furthest):
                self.position = furthest
        self.gtid_state = state.with_gtids(run.gtid_list())

    @property
    def maria_lasts(self) -> Mapping[int, MariaGtid] | None:
        """The MariaDB GTID state's last GTID per domain (empty before any GTID); None when the
        state is MySQL's, which a run of MariaDB transactions cannot follow."""
        state = self.gtid_state
        if state is None:
            return {}
        return state.last if isinstance(state, MariaGtidState) else None

    def _on_event(self, event: BinlogEvent) -> None:
        header = event.header
        payload = event.payload
        if header.server_id and not header.flags & _ARTIFICIAL:
            self.server_id = header.server_id
        if isinstance(payload, RotateEvent):
            self._advance(SourcePosition(payload.next_file, payload.position))
        elif header.log_pos and self.stream is not None:
            self._advance(SourcePosition(self.stream.file, header.log_pos))
        if isinstance(payload, FormatContext):
            self.flavor = payload.flavor
        elif isinstance(payload, MariaGtidEvent):
            gtid = MariaGtid(payload.domain_id, header.server_id, payload.seq_no)
            self.gtid_state = self._checked(self._maria(event), gtid, event)
        elif isinstance(payload, GtidListEvent):
            gtids = (MariaGtid(d, s, n) for d, s, n in payload.gtids)
            self.gtid_state = self._maria(event).with_list(gtids)
            self.gtid_base_known = True
        elif isinstance(payload, MysqlGtidEvent) and payload.gtid is not None:
            self.gtid_state = self._mysql(event).with_gtid(payload.gtid)
        elif isinstance(payload, PreviousGtidsEvent):
            self.gtid_state = self._mysql(event).union(MysqlGtidSet.from_sets(payload.sets))
            self.gtid_base_known = True

    def _advance(self, stream: SourcePosition) -> None:
        """Follow the stream; the restart position only ever moves forward.

        A dump started by GTID begins at the top of the source file holding the GTID and sends
        that file's control events again (ROTATE to offset 4, FORMAT_DESCRIPTION, GTID_LIST,
        BINLOG_CHECKPOINT) before it skips to the first new transaction (measured on MariaDB
        10.11, which then sends a GTID_LIST at the right offset). Those replayed events lie
        behind what the relay log already holds: they move ``stream`` but not ``position``.
        """
        self.stream = stream
        if before(self.position, stream):
            self.position = stream

    def _maria(self, event: BinlogEvent | None) -> MariaGtidState:
        self.flavor = Flavor.MARIADB
        state = self.gtid_state
        if state is None:
            return MariaGtidState()
        if not isinstance(state, MariaGtidState):
            assert event is not None, "a run of MariaDB transactions after MySQL's GTIDs"
            raise _mixed_flavors(event)
        return state

    def _mysql(self, event: BinlogEvent) -> MysqlGtidSet:
        self.flavor = Flavor.MYSQL
        state = self.gtid_state
        if state is None:
            return MysqlGtidSet()
        if not isinstance(state, MysqlGtidSet):
            raise _mixed_flavors(event)
        return state

    @staticmethod
    def _checked(state: MariaGtidState, gtid: MariaGtid, event: BinlogEvent) -> MariaGtidState:
        """The same GTID twice in a row is a doubled transaction: never let it through."""
        if state.last.get(gtid.domain) == gtid:
            raise DuplicateTransactionError(
                f"GTID {gtid} arrives again right after itself", offset=event.offset
            )
        return state.with_gtid(gtid)

    def context_events(self, ctx: FormatContext) -> bytes:
        """The context preamble for a new relay file, encoded in ``ctx`` (see the module)."""
        out = b""
        server_id = self.server_id or 0
        flags = EventFlag.ARTIFICIAL
        for place in self._context_positions():
            rotate = RotateEvent(place.offset, place.file)
            out += encode_event(rotate, ctx, server_id=server_id, flags=flags)
        state = self.gtid_state
        if self.flavor is Flavor.MARIADB and self.gtid_base_known:
            maria = state if isinstance(state, MariaGtidState) else MariaGtidState()
            entries = tuple((g.domain, g.server_id, g.seq) for g in maria.gtids())
            out += encode_event(GtidListEvent(entries, 0), ctx, server_id=server_id, flags=flags)
        elif self.flavor is Flavor.MYSQL and self.gtid_base_known:
            mysql = state if isinstance(state, MysqlGtidSet) else MysqlGtidSet()
            previous = PreviousGtidsEvent(mysql.sets())
            out += encode_event(previous, ctx, server_id=server_id, flags=flags)
        return out

    def _context_positions(self) -> list[SourcePosition]:
        """The restart position, then the stream's when it is behind (replaying a file's
        header after a dump by GTID), so a reader of the file alone follows the same way."""
        if self.position is None:
            return []
        if self.stream is None or self.stream == self.position:
            return [self.position]
        return [self.position, self.stream]


def _mixed_flavors(event: BinlogEvent) -> LogCorruptionError:
    return LogCorruptionError(
        f"{event.type_name} of the other server flavor in the same relay log",
        offset=event.offset,
        event_type=event.type_name,
        hint="a relay log follows one source; point [state] dir at a new folder for a new one",
    )


# ---- derivation from the relay log ----------------------------------------------------------


def derive_restart_point(relay_dir: Path, index_name: str = INDEX_NAME) -> RestartPoint:
    """The restart point of the (already recovered) relay log in ``relay_dir``.

    Reads the newest file that begins with a source context (its preamble, or the stream's
    ROTATE before any transaction) and every file after it; files before it are not read, so
    purged files are never needed.
    """
    index = LogIndex(relay_dir / index_name)
    if not index.exists():
        return EMPTY
    names = index.names()
    start = _newest_with_context(relay_dir, names)
    tracker = SourceTracker()
    for name in names[start:]:
        _feed_file(relay_dir / name, tracker)
    point = tracker.point(names[-1] if names else None)
    if point.position is None and tracker.transactions:
        raise LogCorruptionError(
            f"the relay log holds {tracker.transactions} transactions but no event naming their "
            "source binlog file (no ROTATE and no context preamble)",
            file=str(relay_dir / names[start]),
            hint="this relay log was not written by `binlake receive`; use a new state folder",
        )
    return point


def _newest_with_context(relay_dir: Path, names: list[str]) -> int:
    for i in range(len(names) - 1, -1, -1):
        if _starts_with_context(relay_dir / names[i]):
            return i
    return 0


def _starts_with_context(path: Path) -> bool:
    """Whether a ROTATE comes before the first transaction of the file."""
    with path.open("rb") as f, BinlogFileReader(f, path.name) as reader:
        try:
            for group in reader.groups():
                if group.is_transaction:
                    return False
                if any(isinstance(e.payload, RotateEvent) for e in group.events):
                    return True
        except BinlogFormatError as error:
            raise _damaged(error) from None
    return False


def _feed_file(path: Path, tracker: SourceTracker) -> None:
    grouper = TransactionGrouper()
    with path.open("rb") as f, BinlogFileReader(f, path.name) as reader:
        try:
            for group in reader.groups(grouper):
                if group.events[0].offset == OWN_FORMAT_DESCRIPTION_OFFSET:
                    continue  # binlake's own FORMAT_DESCRIPTION, not a source event
                tracker.on_group(group)
        except (DuplicateTransactionError, LogCorruptionError) as error:
            raise error.with_location(file=path.name) from None
        except BinlogFormatError as error:
            raise _damaged(error) from None
    if grouper.in_group:
        raise LogCorruptionError(
            "the relay file ends inside a transaction after recovery",
            file=path.name,
            offset=grouper.open_events[0].offset,
        )


def _damaged(error: BinlogFormatError) -> LogCorruptionError:
    return LogCorruptionError(
        f"the relay log is damaged after recovery: {error.message}",
        file=error.file,
        offset=error.offset,
        event_type=error.event_type,
    )
