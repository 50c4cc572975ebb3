"""Runs of whole small transactions, framed and grouped in one step (issue #37).

An OLTP source's stream is mostly transactions of a few events: a MariaDB GTID, an
ANNOTATE_ROWS, a TABLE_MAP, a rows event or a few, an XID. Appended one event at a time, each
such transaction costs the receiver a framed event, a grouper step and a group object per event,
then a restart-tracker and fsync-schedule step. ``scan_transactions`` takes, from one batch of
received events (their CRC32s checked by the client), the longest run of such whole
transactions in their usual shapes, and returns what the writer, the restart tracker and the
fsync schedule need of them (``TransactionRun``): how many events and bytes, how many
transactions, the source positions they reach, their GTIDs' last per domain. No object is made
per event.

The per-event path (``RelayLogWriter.append``, ``SourceTracker.on_group``) stays the reference,
and the scan takes only what that path would accept with the same outcome
(``tests/property/test_transaction_runs.py`` holds the two equal):

- a MariaDB GTID of the minimal shape (no commit id, no XA, not standalone: it opens a
  transaction), whose GTID is not the one just before it in its domain (a doubled transaction,
  which the tracker refuses);
- then rows events and ANNOTATE_ROWS (``EventFramer.rows_run_end``'s checks), and TABLE_MAPs
  whose body the writer framed before in this format context and which need no source fact
  (``EventFramer.table_maps``, ``plain_maps``);
- closed by an XID of the usual size.

Anything else ends the run before the transaction it is in: the per-event path takes it, and
raises the precise error where something is wrong.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence

from binlake.binlog.codec import EventFramer
from binlake.binlog.constants import HEADER_LEN, EventFlag, EventType
from binlake.binlog.events import (
    FL_COMPLETED_XA,
    FL_GROUP_COMMIT_ID,
    FL_PREPARED_XA,
    FL_STANDALONE,
    MARIA_GTID_MIN_BODY,
)
from binlake.gtid import MariaGtid

_GTID, _XID, _TABLE_MAP = int(EventType.MARIADB_GTID), int(EventType.XID), int(EventType.TABLE_MAP)
#: A GTID with any of these flags is left to the per-event path (more fields, or no transaction).
_GTID_NOT_PLAIN = FL_GROUP_COMMIT_ID | FL_PREPARED_XA | FL_COMPLETED_XA | FL_STANDALONE
#: Where a GTID body's domain id and flags are in the event (after seq_no, 8 bytes).
_DOMAIN_AT = HEADER_LEN + 8
_FLAGS2_AT = HEADER_LEN + 12
_XID_BODY = 8
_ARTIFICIAL = int(EventFlag.ARTIFICIAL)


class TransactionRun:
    """What a run of whole transactions brings (see the module docstring)."""

    def __init__(self, start: int) -> None:
        #: The index after the run's last event (``start``: no transaction taken).
        self.end = start
        self.transactions = 0
        self.nbytes = 0
        #: The last and the largest nonzero end_log_pos of the GTIDs and XIDs (0: none).
        self.last_pos = 0
        self.max_pos = 0
        #: The last nonzero server id of a GTID not flagged artificial (0: none).
        self.server_id = 0
        #: Per domain, the last GTID of the run: (server_id, seq_no).
        self.gtids: dict[int, tuple[int, int]] = {}

    def gtid_list(self) -> list[MariaGtid]:
        return [MariaGtid(d, server, seq) for d, (server, seq) in self.gtids.items()]


def _u32(event: bytes, at: int) -> int:
    return event[at] | event[at + 1] << 8 | event[at + 2] << 16 | event[at + 3] << 24


def _u64(event: bytes, at: int) -> int:
    return _u32(event, at) | _u32(event, at + 4) << 32


def _framed(event: object) -> bytes | None:
    """``event`` when it is a bytes object with a header whose size is its length."""
    if type(event) is not bytes or len(event) < HEADER_LEN:
        return None
    return event if _u32(event, 9) == len(event) else None


def _plain_gtid(event: bytes, trailer: int) -> bool:
    return (
        event[4] == _GTID
        and len(event) == HEADER_LEN + MARIA_GTID_MIN_BODY + trailer
        and not event[_FLAGS2_AT] & _GTID_NOT_PLAIN
    )


def _transaction_end(
    events: Sequence[object],
    at: int,
    framer: EventFramer,
    trailer: int,
    maps: tuple[Container[bytes], Container[bytes]],
) -> int:
    """The index after the XID that closes the transaction whose GTID is ``events[at]``;
    ``at`` when it is not whole in ``events`` or not of the shapes the run takes."""
    end = len(events)
    i = at + 1
    while i < end:
        i = framer.rows_run_end(events, i)
        if i >= end:
            return at
        event = _framed(events[i])
        if event is None:
            return at
        code = event[4]
        size = len(event)
        if code == _XID:
            return i + 1 if size == HEADER_LEN + _XID_BODY + trailer else at
        if code != _TABLE_MAP or size < HEADER_LEN + trailer:
            return at
        body = event[HEADER_LEN : size - trailer]
        if body not in maps[0] or body not in maps[1]:
            return at
        i += 1
    return at


def scan_transactions(
    events: Sequence[object],
    start: int,
    framer: EventFramer,
    maps: tuple[Container[bytes], Container[bytes]],
    lasts: Mapping[int, MariaGtid],
    limit: int,
    until_pos: int = 0,
    max_bytes: int = 1 << 20,
) -> TransactionRun:
    """The run of whole transactions from ``events[start]`` (see the module docstring), in
    ``framer``'s format context. ``maps``: the TABLE_MAP bodies ``framer`` decoded before
    (``EventFramer.table_maps``), and those that need no source fact. ``lasts``: the GTID
    state before the run (per domain, the last GTID). At most ``limit`` transactions; the run
    ends after the first that reaches source offset ``until_pos`` in its file (0: no such
    end), or that brings it to ``max_bytes`` (so a run is handed to the disk in pieces of the
    writer's usual size)."""
    run = TransactionRun(start)
    trailer = framer.context.checksum_len
    domain = server = seq = -1  # the current domain's last GTID in the run (-1: none yet)
    at = start
    while run.transactions < limit and at < len(events):
        gtid = _framed(events[at])
        if gtid is None or not _plain_gtid(gtid, trailer):
            break
        end = _transaction_end(events, at, framer, trailer, maps)
        if end == at:
            break
        g_domain, g_server, g_seq = _u32(gtid, _DOMAIN_AT), _u32(gtid, 5), _u64(gtid, HEADER_LEN)
        if g_domain == domain:
            doubled = g_server == server and g_seq == seq
        else:
            doubled = _last_of(g_domain, run, lasts) == (g_server, g_seq)
        if doubled:
            break  # a doubled transaction: the per-event path refuses it
        if g_domain != domain and domain >= 0:
            run.gtids[domain] = (server, seq)
        domain, server, seq = g_domain, g_server, g_seq
        _take(run, events, at, end, gtid)
        at = end
        if (until_pos and run.max_pos >= until_pos) or run.nbytes >= max_bytes:
            break
    if domain >= 0 and run.transactions:
        run.gtids[domain] = (server, seq)
    return run


def _last_of(
    domain: int, run: TransactionRun, lasts: Mapping[int, MariaGtid]
) -> tuple[int, int] | None:
    """The GTID before the next one of ``domain``: the run's, else the state's."""
    known = run.gtids.get(domain)
    if known is not None:
        return known
    before = lasts.get(domain)
    return None if before is None else (before.server_id, before.seq)


def _take(run: TransactionRun, events: Sequence[object], at: int, end: int, gtid: bytes) -> None:
    """Count the transaction ``events[at:end]`` (framed by ``_transaction_end``) in ``run``."""
    nbytes = 0
    for i in range(at, end):
        event = events[i]
        assert type(event) is bytes
        nbytes += len(event)
    run.nbytes += nbytes
    run.transactions += 1
    run.end = end
    if _u32(gtid, 5) and not (gtid[17] | gtid[18] << 8) & _ARTIFICIAL:
        run.server_id = _u32(gtid, 5)
    xid = events[end - 1]
    assert type(xid) is bytes
    for pos in (_u32(gtid, 13), _u32(xid, 13)):
        if pos:
            run.last_pos = pos
            run.max_pos = max(run.max_pos, pos)
