"""`binlake receive`: stream the source's binlog into the crash-safe relay log.

One run:

1. take the state folder's lock (a second process refuses, naming the first);
2. connect and log in (a source that cannot be reached, or refuses the login, is reported at
   once); ``connected`` is set then (``binlake replicate`` starts Spark while step 3 runs);
3. recover the relay log (WL#5493: trim to the last complete transaction, clear IN_USE) and
   derive the restart point from it alone (WL#4621, relay/restart.py);
   then check the server's identity against ``source.state`` and the restart point
   (source/identity.py); refuse a different server unless ``--accept-new-source``;
4. open the relay log writer (a new relay file, whose header carries the source context) and
   dump from the restart point: by GTID state or by file and offset (``[source] mode``);
5. append every event verbatim (heartbeats are not stored), with the source facts the applier
   needs beside the TABLE_MAP and ALTER events that need them (source/facts.py: UUID/INET column
   hints, time zone conversions), so that applying the relay log needs no source; fsync only at
   transaction boundaries, per ``[receiver] sync``; rotate the relay file with the source's
   ROTATE and by size;
6. on a lost connection (EOF, reset, heartbeat silence, unreachable): close the writer (a partial
   transaction leaves IN_USE set), wait (capped exponential backoff with jitter) and start again
   at step 2: recovery trims the partial transaction, and the restart point is the end of the
   last complete one. That is the one path by which a partial transaction is dropped, the same
   after a drop, a clean stop inside a transaction, and a crash. A lost position (error 1236)
   and a refused login are not retried;
7. stop on SIGINT/SIGTERM (``request_stop``), or with ``until_caught_up`` once the relay log holds
   everything the source's binlog held when the run started: sync, close (IN_USE cleared),
   release the lock.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from enum import Enum

from binlake.binlog.codec import decode_event
from binlake.binlog.constants import HEARTBEAT_TYPES, EventFlag, EventType
from binlake.binlog.events import HeartbeatEvent, RotateEvent
from binlake.binlog.format import Flavor
from binlake.binlog.transactions import EventGroup
from binlake.config import Config, ReplicationMode
from binlake.crashpoints import crash_point
from binlake.errors import SourceConfigError, SourceError
from binlake.position import RelayPosition, SourcePosition, at_or_before, before
from binlake.relay import INDEX_NAME
from binlake.relay.handoff import RelayProgress
from binlake.relay.restart import EMPTY, RestartPoint, SourceTracker
from binlake.relay.restart import derive_restart_point as derive
from binlake.relay.runs import TransactionRun
from binlake.relay.writer import RelayLogWriter
from binlake.source.client import DumpStart, ServerInfo, SourceConnection
from binlake.source.facts import FactRecorder
from binlake.source.feed import EventFeed
from binlake.source.identity import (
    SourceIdentity,
    SourceStateFile,
    identity_changed_error,
    identity_problems,
    with_mode,
)
from binlake.source.policy import Backoff, SyncSchedule
from binlake.source.progress import Progress, behind_bytes
from binlake.source.queries import SourceQueries
from binlake.source.settings import connection_settings
from binlake.storage.checkpoint import CheckpointRecord, scan_start
from binlake.storage.index import LogIndex, index_temp_copies
from binlake.storage.lock import lock_state_folder
from binlake.storage.recovery import recover_log

#: Type codes the receive loop compares an event's byte 4 with (plain ints: no enum lookups).
_HEARTBEAT = int(EventType.HEARTBEAT)
_QUERY = int(EventType.QUERY)
_TABLE_MAP = int(EventType.TABLE_MAP)
_MARIA_GTID = int(EventType.MARIADB_GTID)
#: Longest wait for the rest of an open transaction after a stop request.
STOP_GRACE_S = 2.0
#: Longest wait for events before the loop looks at the stop flag and the clocks again.
POLL_S = 0.2


class Outcome(Enum):
    STOPPED = "stopped"
    CAUGHT_UP = "caught up"


@dataclass(frozen=True)
class ReceiveResult:
    outcome: Outcome
    #: The restart point after the run: what the relay log durably holds.
    restart: RestartPoint
    events: int
    bytes: int
    transactions: int
    reconnects: int


class _DumpSession:
    """One connection's worth of streaming: the writer, the tracker and the fsync schedule."""

    def __init__(self, writer: RelayLogWriter, tracker: SourceTracker, schedule: SyncSchedule):
        self.writer = writer
        self.tracker = tracker
        self.schedule = schedule
        self.durable: SourcePosition | None = tracker.position
        self.heartbeat: SourcePosition | None = None


class Receiver:
    def __init__(
        self,
        config: Config,
        *,
        until_caught_up: bool = False,
        accept_new_source: bool = False,
        progress: Progress | None = None,
        relay_progress: RelayProgress | None = None,
        take_lock: bool = True,
    ) -> None:
        self.config = config
        #: Shared with an applier in the same process (binlake replicate): the relay log's
        #: durable end is published there, and index changes take its lock.
        self.relay_progress = relay_progress or RelayProgress()
        #: False when the caller already holds the state folder's lock (binlake replicate).
        self.take_lock = take_lock
        self.until_caught_up = until_caught_up
        self.accept_new_source = accept_new_source
        self.progress = progress or Progress(interval_s=config.receiver.progress_interval_s)
        self._stop = threading.Event()
        self._state_file = SourceStateFile(config.state.source_state_path)
        self._target: SourcePosition | None = None
        self._binlog_files: tuple[tuple[str, int], ...] = ()
        self._reconnects = 0
        self._outcome: Outcome | None = None
        self._facts = FactRecorder(SourceQueries(connection_settings(config.source)))
        #: Set once the run's first connection has logged in to the source, or failed on a
        #: restart and is retried while the relay log applies (``_first_connection``).
        self.connected = threading.Event()

    @property
    def address(self) -> str:
        return f"{self.config.source.host}:{self.config.source.port}"

    def request_stop(self) -> None:
        """Ask for a clean stop (safe to call from a signal handler)."""
        self._stop.set()

    # ---- the run ------------------------------------------------------------------------------

    def run(self) -> ReceiveResult:
        state_dir = self.config.state.dir
        lock = lock_state_folder(state_dir) if self.take_lock else contextlib.nullcontext()
        with lock, contextlib.closing(self._facts):
            # A damaged source.state is refused now, before recovery publishes the relay log:
            # an applier in the same process (replicate) would otherwise start and purge.
            self._state_file.read()
            connection = self._first_connection()
            self.connected.set()
            try:
                restart = self._recover(initial=True)
            except BaseException:
                if connection is not None:
                    connection.close()
                raise
            if connection is None:  # a restart that could not connect yet: the relay log applies
                connection = self._connect_after_start()
            final: RestartPoint | None = None
            while connection is not None:
                final = self._session(connection, restart)
                if self._outcome is not None:
                    break
                connection = self._reconnect()  # None: a stop was requested while waiting
                if connection is not None:
                    restart = self._recover(initial=False)
            if final is None:  # closed inside a transaction: recovery drops the partial one
                final = self._recover(initial=False)
        counts = self.progress.total
        outcome = self._outcome or Outcome.STOPPED
        self.progress.message(f"{outcome.value}; relay log holds {final.describe()}")
        return ReceiveResult(
            outcome, final, counts.events, counts.bytes, counts.transactions, self._reconnects
        )

    def _session(self, connection: SourceConnection, restart: RestartPoint) -> RestartPoint | None:
        """Stream on ``connection`` from ``restart`` until the connection fails (a retryable
        error returns; any other is raised) or the run ends (``_outcome`` set). Returns where
        the relay log ends when it was closed cleanly at a transaction boundary, else None."""
        session: _DumpSession | None = None
        try:
            self._check_identity(connection.server, restart)
            self._binlog_files = connection.server.binlog_files
            start = self._dump_start(restart, connection.server)
            tracker = SourceTracker(restart)
            writer = self._open_writer(tracker)
            session = _DumpSession(writer, tracker, SyncSchedule.from_config(self.config.receiver))
            try:
                self.progress.message(f"streaming from {self.address} at {start.describe()}")
                self._stream(connection, session, start)
            finally:
                self._close_writer(session)
        except SourceError as error:
            if not error.retryable:
                raise
            self.progress.message(f"connection lost: {error}")
        finally:
            connection.close()
        if session is None or session.writer.in_transaction or session.writer.failed:
            return None
        return session.tracker.point(session.writer.position.file)

    # ---- recovery and the restart point -----------------------------------------------------

    def _recover(self, *, initial: bool) -> RestartPoint:
        """Recover the relay log and derive the restart point from it (WL#4621)."""
        relay = self.config.state.relay_dir
        index = LogIndex(relay / INDEX_NAME)
        if not relay.is_dir() or (not index.exists() and not index_temp_copies(index.path)):
            self.relay_progress.on_recovered(EMPTY, None)
            return EMPTY
        names = index.names() if index.exists() else []
        scan_from = names[-1] if names else None
        if initial and names:
            scan_from = scan_start(CheckpointRecord(self.config.state.checkpoint_path), names)
        with self.relay_progress.index_lock:
            report = recover_log(relay, scan_from=scan_from, index_name=INDEX_NAME)
            if report.changed:
                for line in report.lines:
                    self.progress.message(f"relay log recovery: {line}")
            point = derive(relay, INDEX_NAME)
            self.relay_progress.on_recovered(point, _relay_end(index))
        return point

    def _open_writer(self, tracker: SourceTracker) -> RelayLogWriter:
        relay = self.config.state.relay_dir
        index = LogIndex(relay / INDEX_NAME)
        names = index.names() if index.exists() else []
        with self.relay_progress.index_lock:
            writer = RelayLogWriter.open(
                relay,
                max_file_size=self.config.receiver.max_relay_file_size,
                server_id=self.config.source.server_id,
                scan_from=names[-1] if names else None,
                preamble=tracker.context_events,
            )
        self.relay_progress.on_synced(writer.position)  # the new file's header is durable
        return writer

    def _close_writer(self, session: _DumpSession) -> None:
        """Sync and close at a boundary; inside a transaction the file keeps IN_USE and the next
        recovery trims the partial transaction."""
        writer = session.writer
        if writer.failed is None and not writer.in_transaction:
            self._sync(session)
            crash_point("receiver_stop_before_close")
        writer.close()

    # ---- connecting -----------------------------------------------------------------------------

    def _connect(self) -> SourceConnection:
        return SourceConnection.open(connection_settings(self.config.source))

    def _first_connection(self) -> SourceConnection | None:
        """The run's first connection. On a new state folder a failure is not retried (a wrong
        host or password shows at once); on one that has streamed from its source before (a
        restart), a failure that may pass (a reset, a refused connection, a source restarting)
        is reported and None returned: the run recovers the relay log, lets the applier apply
        it, and connects with backoff like any reconnect (``_connect_after_start``)."""
        try:
            connection = self._connect()
        except SourceError as error:
            if not error.retryable or self._state_file.read() is None:
                raise
            self.progress.message(f"connection failed: {error.message}")
            return None
        return self._with_target(connection)

    def _connect_after_start(self) -> SourceConnection | None:
        """A restart's first connection, after it failed once: with backoff (None: a stop was
        requested meanwhile)."""
        connection = self._reconnect()
        return None if connection is None else self._with_target(connection)

    def _with_target(self, connection: SourceConnection) -> SourceConnection:
        try:
            self._set_target(connection)
        except BaseException:
            connection.close()
            raise
        return connection

    def _reconnect(self) -> SourceConnection | None:
        """Connect again with backoff; None when a stop was requested meanwhile."""
        backoff = Backoff.from_config(self.config.receiver)
        outage_started = time.monotonic()
        while True:
            wait = backoff.next_wait()
            self.progress.message(f"reconnecting to {self.address} in {wait:.1f}s")
            if self._stop.wait(wait):
                return None
            try:
                connection = self._connect()
            except SourceError as error:
                if not error.retryable:
                    raise
                self._check_give_up(error, backoff, time.monotonic() - outage_started)
                continue
            self._reconnects += 1
            return connection

    def _check_give_up(self, error: SourceError, backoff: Backoff, outage_s: float) -> None:
        limit = self.config.receiver.catch_up_give_up_s
        if self.until_caught_up and outage_s >= limit:
            raise type(error)(
                f"gave up after {outage_s:.0f}s without the source "
                f"(catch_up_give_up_s = {limit:g}): {error.message}",
                hint=error.hint,
            )
        if backoff.exhausted:
            raise type(error)(
                f"gave up after {backoff.attempts} reconnect attempts "
                f"(reconnect_max_attempts): {error.message}",
                hint=error.hint,
            )

    def _check_identity(self, server: ServerInfo, restart: RestartPoint) -> None:
        mode = self.config.source.mode
        recorded = self._state_file.read()
        problems = identity_problems(recorded, server, restart)
        if problems and not self.accept_new_source:
            raise identity_changed_error(recorded, server, self.address, problems)
        if problems:
            self.progress.message(
                "accepting a new source (--accept-new-source): " + "; ".join(problems)
            )
            self._state_file.record(SourceIdentity.of_server(server, mode, self.address))
        elif recorded is None:
            self._state_file.record(SourceIdentity.of_server(server, mode, self.address))
        elif recorded.mode != mode.value:
            self.progress.message(f"replication mode changed from {recorded.mode} to {mode.value}")
            self._state_file.record(with_mode(recorded, mode))

    def _dump_start(self, restart: RestartPoint, server: ServerInfo) -> DumpStart:
        position = restart.position
        if position is None:
            first = server.binlog_files[0][0] if server.binlog_files else None
            return DumpStart(file=first, position=4)
        state = restart.gtid_state
        gtid_usable = state is not None and (restart.flavor is Flavor.MARIADB or bool(state))
        if self.config.source.mode is ReplicationMode.GTID and state is not None and gtid_usable:
            return DumpStart(gtid_state=state.text())
        return DumpStart(file=position.file, position=position.offset)

    def _set_target(self, connection: SourceConnection) -> None:
        """With --until-caught-up: the end of the source's binlog now."""
        if not self.until_caught_up:
            return
        files = connection.server.binlog_files
        if not files:
            rows = connection.query("SHOW MASTER STATUS")
            if not rows:
                raise SourceConfigError(
                    f"the source at {self.address} reports no binary log position",
                    hint="enable log_bin on the source and grant binlake's user "
                    "REPLICATION CLIENT (BINLOG MONITOR on MariaDB)",
                    setting="log_bin",
                )
            files = ((str(rows[0][0]), int(rows[0][1])),)
        self._target = SourcePosition(*files[-1])
        self.progress.message(f"will stop once caught up with {self._target}")

    # ---- streaming ------------------------------------------------------------------------------

    def _stream(
        self, connection: SourceConnection, session: _DumpSession, start: DumpStart
    ) -> None:
        feed = EventFeed(connection.dump_batches(start)).start()
        stop_deadline: float | None = None
        try:
            while self._outcome is None:
                now = time.monotonic()
                if self._stop.is_set():
                    stop_deadline = stop_deadline or now + STOP_GRACE_S
                    if not session.writer.in_transaction or now >= stop_deadline:
                        self._outcome = Outcome.STOPPED
                        return
                self._on_batch(session, feed.take(self._wait_s(session, now)))
                self._tick(session, time.monotonic())
        finally:
            feed.stop(join_timeout=0)

    def _wait_s(self, session: _DumpSession, now: float) -> float:
        due = session.schedule.wait_s(now)
        return POLL_S if due is None else min(POLL_S, due)

    def _on_batch(self, session: _DumpSession, batch: list[bytes]) -> None:
        """Append a batch of events; stops early once caught up, or at a transaction boundary
        once a stop was requested (the rest is fetched again next time). The runs of rows
        events inside a transaction, most of a stream, are appended a run at a time."""
        writer = session.writer
        append_rows_run, stopping = writer.append_rows_run, self._stop.is_set
        run_codes = writer.run_codes  # a first test only: append checks each event itself
        appended = nbytes = transactions = 0
        at, end = 0, len(batch)
        while at < end:
            raw = batch[at]
            if raw[4] == _MARIA_GTID:
                run = self._append_transactions(session, batch, at)
                if run.transactions:  # whole transactions, up to a boundary
                    appended += run.end - at
                    nbytes += run.nbytes
                    transactions += run.transactions
                    at = run.end
                    if self._outcome is not None or stopping():
                        break
                    continue
            if raw[4] in run_codes:
                run_end = append_rows_run(batch, at)  # the client checked their CRC32s
                if run_end > at:
                    appended += run_end - at
                    nbytes += sum(map(len, batch[at:run_end]))
                    at = run_end
                    continue
            at += 1
            if raw[4] in HEARTBEAT_TYPES:
                if raw[4] == _HEARTBEAT:
                    self._on_heartbeat(session, raw)
            else:
                appended += 1
                nbytes += len(raw)
                transactions += self._append_event(session, raw)
            if self._outcome is not None or (stopping() and not writer.in_transaction):
                break
        self.progress.count(appended, nbytes, transactions)

    def _append_transactions(
        self, session: _DumpSession, batch: list[bytes], at: int
    ) -> TransactionRun:
        """Append the run of whole small transactions from ``batch[at]`` in one step
        (``RelayLogWriter.append_transactions``), then follow it as ``_on_group`` follows each
        group: the tracker, the fsync schedule (the run ends where the count falls due), the
        target (the run ends at the transaction that reaches it)."""
        lasts = session.tracker.maria_lasts
        if lasts is None:
            return TransactionRun(at)
        run = session.writer.append_transactions(
            batch,
            at,
            plain_maps=self._facts.plain_maps,
            lasts=lasts,
            limit=session.schedule.room,
            until_pos=self._until_pos(session.tracker),
        )
        if run.transactions:
            session.tracker.on_run(run)
            now = time.monotonic()
            session.schedule.on_transactions(run.transactions, now)
            if session.schedule.due(now):
                self._sync(session)
            if self._reached_target(session.tracker.position):
                self._finish_caught_up(session)
        return run

    def _until_pos(self, tracker: SourceTracker) -> int:
        """The source offset in the stream's current file at which the target is reached (0:
        not in this file; 1: reached already, the next transaction ends the run)."""
        target, stream = self._target, tracker.stream
        if target is None or stream is None:
            return 0
        if self._reached_target(tracker.position):
            return 1
        if target.file == stream.file:
            return target.offset
        return 1 if before(target, stream) else 0

    def _append_event(self, session: _DumpSession, raw: bytes) -> int:
        """Append one event (with the source facts that go beside it); returns 1 when it
        completed a transaction, else 0."""
        writer = session.writer
        code = raw[4]
        if code == _QUERY:
            self._append_fact(writer, self._facts.before_query(raw, writer.format_context))
        writer.append(raw, crc_checked=True)  # the client checked it on receipt
        if code == _TABLE_MAP:
            self._append_fact(writer, self._facts.after_table_map(raw, writer.format_context))
        group = writer.last_group
        if group is None:
            return 0
        self._on_group(session, group)
        return int(group.is_transaction)

    @staticmethod
    def _append_fact(writer: RelayLogWriter, fact: bytes | None) -> None:
        """A source-facts event, inside the group of the event it belongs to."""
        if fact is not None:
            writer.append(fact)

    def _on_group(self, session: _DumpSession, group: EventGroup) -> None:
        session.tracker.on_group(group)
        now = time.monotonic()
        if group.is_transaction:
            session.schedule.on_transaction(now)
        elif _is_source_rotate(group):
            crash_point("receiver_before_source_rotate")
            with self.relay_progress.index_lock:
                session.writer.rotate()  # fsyncs the old file: everything before is durable
            self.relay_progress.on_synced(session.writer.position)
            session.schedule.on_synced()
            session.durable = session.tracker.position
        if session.schedule.due(now):
            self._sync(session)
        if self._reached_target(session.tracker.position):
            self._finish_caught_up(session)

    def _on_heartbeat(self, session: _DumpSession, raw: bytes) -> None:
        """A heartbeat says the source has sent everything up to (its file, its log_pos)."""
        event = decode_event(raw, session.writer.format_context, crc_checked=True)
        assert isinstance(event.payload, HeartbeatEvent)
        session.heartbeat = SourcePosition(event.payload.log_file, event.header.log_pos)
        if not session.writer.in_transaction and self._reached_target(session.heartbeat):
            self._finish_caught_up(session)

    def _reached_target(self, position: SourcePosition | None) -> bool:
        target = self._target
        return target is not None and position is not None and at_or_before(target, position)

    def _finish_caught_up(self, session: _DumpSession) -> None:
        self._sync(session)
        self._outcome = Outcome.CAUGHT_UP

    def _tick(self, session: _DumpSession, now: float) -> None:
        if session.schedule.due(now) and not session.writer.in_transaction:
            self._sync(session)
        if self.progress.due(now):
            self.progress.status(
                now, session.durable, behind_bytes(session.durable, self._binlog_files)
            )

    def _sync(self, session: _DumpSession) -> None:
        with self.relay_progress.index_lock:  # a sync may rotate, which changes the index
            synced = session.writer.sync()
        crash_point("receiver_after_sync")
        self.relay_progress.on_synced(synced)
        session.schedule.on_synced()
        session.durable = session.tracker.position


def _relay_end(index: LogIndex) -> RelayPosition | None:
    """The end of the (recovered) relay log: its newest file's size."""
    names = index.names() if index.exists() else []
    if not names:
        return None
    return RelayPosition(names[-1], (index.folder / names[-1]).stat().st_size)


def _is_source_rotate(group: EventGroup) -> bool:
    """The ROTATE that ends a source binlog (not the artificial one a dump starts with)."""
    event = group.events[-1]
    header = event.header
    return (
        isinstance(event.payload, RotateEvent)
        and header.log_pos != 0
        and not header.flags & EventFlag.ARTIFICIAL
    )
