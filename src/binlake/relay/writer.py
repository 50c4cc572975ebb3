"""The relay log: binlog v4 files binlake owns, holding the source's events verbatim.

A folder holds ``relay-bin.000001``, ``relay-bin.000002``, ... and their index ``relay-bin.index``
(docs/format.md has the bytes). Each file starts with the magic and binlake's own
FORMAT_DESCRIPTION (server version ``10.11.0-binlake-<version>``, CRC32, MariaDB 10.11's post-header
lengths) with IN_USE set while the file is open. Then come the events exactly as received, so a
file can be compared byte for byte with the source binlog it copies. A FORMAT_DESCRIPTION from the
source switches the format context used to verify the events after it (as in MySQL relay logs);
after a rotation the last source FORMAT_DESCRIPTION is copied into the new file, after ours, so
that every file can be read on its own. The caller may add a *preamble* (``preamble``: bytes
built when the file is created, encoded in the format context in force): the receiver puts its
source context there (source file, offset and GTID state where the file begins), so that every
file also says where it stands in the source (relay/restart.py). The preamble is part of the
header: written and fsynced with it, before the index lists the file.

Durability contract:

- ``append`` verifies the event (framing and CRC32, in the current format context) and refuses a
  bad one before writing a byte; ``crc_checked=True`` says the caller has just verified this very
  bytes object's CRC32 (the receiver's protocol client does, on receipt), so it is not computed a
  second time; framing is still checked, and every body but a rows event's images is decoded
  (of a rows event, its flags are read, or only its type and size inside a transaction, which
  no rows event can end; its images are the applier's to decode, which refuses a malformed one
  as it refuses any event it cannot read). ``append_rows_run`` takes a whole run of received
  rows events inside a transaction in one step, with the same checks; ``append_transactions``
  a run of whole small transactions (relay/runs.py). Appended events are
  gathered in user space and handed over per ``FLUSH_BYTES`` to a write-behind thread
  (relay/write_behind.py: ``writev`` in order, then ``start_writeback`` so the next fsync finds
  little to write); every fsync, rotation and close first waits until everything handed over
  is written. A crash loses at most what was never synced, which recovery and the receiver
  already treat as lost. ``append`` never fsyncs.
- ``sync`` fsyncs. The writer never decides to fsync on its own: the caller syncs once per group
  of transactions, and what ``sync`` returned is what survives any crash.
- Transaction boundaries are tracked by the writer itself (``TransactionGrouper``), not taken on
  the caller's word: ``boundary`` is the end of the last complete transaction or control event.
- Rotation by size happens inside ``sync`` (after its fsync) once the file has reached
  ``max_file_size`` at a transaction boundary; ``rotate()`` rotates on demand (source rotation)
  and refuses inside a transaction. Rotating fsyncs the old file, creates the new one (marker,
  header fsynced, index updated), then closes the old one (IN_USE cleared in place, fsync). A file
  may exceed ``max_file_size`` by the events of one sync group.
- ``close`` fsyncs, clears IN_USE in place (the FORMAT_DESCRIPTION's CRC32 is computed with it
  cleared, so it stays valid) and fsyncs again. A writer closed inside a transaction leaves IN_USE
  set, and recovery trims the partial transaction at the next open.
- Any write or fsync error (``DiskFullError`` for a full disk; a write's error is raised by the
  next hand-over or sync after it) puts the writer in a failed state:
  it refuses further appends; open a new writer once the cause is fixed. The file keeps a torn
  tail at worst, which recovery trims; nothing synced is lost.

``RelayLogWriter.open`` runs recovery (storage/recovery.py) and then starts a new file, as MySQL
starts a new relay log file at each start.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Container, Mapping, Sequence
from pathlib import Path
from types import TracebackType

from binlake import __version__
from binlake.binlog.codec import BinlogEvent, EventFramer, decode_event, encode_event
from binlake.binlog.constants import HEADER_LEN, MAGIC, ChecksumAlg, EventFlag
from binlake.binlog.errors import BinlakeError, TruncatedEventError
from binlake.binlog.format import FormatContext, flavor_of
from binlake.binlog.transactions import EventGroup, TransactionGrouper
from binlake.crashpoints import armed, crash_point, die, should_crash
from binlake.errors import RelayLogStateError
from binlake.gtid import MariaGtid
from binlake.position import RelayPosition, sequence_number
from binlake.relay import DEFAULT_BASENAME
from binlake.relay.runs import TransactionRun, scan_transactions
from binlake.relay.write_behind import WriteBehind, write_all
from binlake.storage.durable import fsync_dir, fsync_fd, make_folder, raise_os_error
from binlake.storage.index import LogIndex, Marker, MarkerOp, index_temp_copies
from binlake.storage.recovery import RecoveryReport, clear_in_use, recover_log

#: Builds the control events a new file carries after the FORMAT_DESCRIPTIONs, encoded in the
#: given format context (see the module docstring).
Preamble = Callable[[FormatContext], bytes]
DEFAULT_MAX_FILE_SIZE = 128 * 1024 * 1024
#: Appended bytes gathered before one ``writev`` hands them to the OS.
FLUSH_BYTES = 1 << 20
#: Where an event's type code is (in its common header).
_TYPE_AT = 4

#: The post-header lengths of a MariaDB 10.11 FORMAT_DESCRIPTION (event types 1..171).
MARIADB_10_11_POST_HEADER_LENGTHS = bytes.fromhex(
    "380d000800120004040404120000e400041a08000000080808020000000a0a0a"
    "0000000000000a0a0a" + "00" * 119 + "041304000d0808080a0a0a"
)


#: Our FORMAT_DESCRIPTION's server version. MariaDB and MySQL readers (mariadb-binlog,
#: mysqlbinlog, the servers) reject a FORMAT_DESCRIPTION whose version does not start with
#: "X.Y.Z" (``version_is_valid``: all three numbers 0 is invalid) and take the presence of the
#: checksum-algorithm byte from that number (>= 5.6.1, or >= 5.3 with "MariaDB" in the string).
#: A bare ``binlake-0.1.0`` would make our files unreadable by the reference decoder, so the
#: numbers of the post-header table we copy (MariaDB 10.11) come first.
SERVER_VERSION = f"10.11.0-binlake-{__version__}"


def relay_format_context(create_timestamp: int = 0) -> FormatContext:
    """binlake's own FORMAT_DESCRIPTION: what our relay files declare before any source event."""
    version = SERVER_VERSION
    return FormatContext(
        binlog_version=4,
        server_version=version,
        create_timestamp=create_timestamp,
        header_length=HEADER_LEN,
        post_header_lengths=tuple(MARIADB_10_11_POST_HEADER_LENGTHS),
        checksum_alg=ChecksumAlg.CRC32,
        flavor=flavor_of(version),
    )


def format_description_event(timestamp: int, server_id: int = 0) -> bytes:
    """Our FORMAT_DESCRIPTION as written at offset 4 of a new file: IN_USE set, end_log_pos set."""
    ctx = relay_format_context(timestamp)
    size = len(encode_event(ctx, ctx))
    return encode_event(
        ctx,
        ctx,
        timestamp=timestamp,
        server_id=server_id,
        log_pos=len(MAGIC) + size,
        flags=EventFlag.BINLOG_IN_USE,
    )


class RelayLogWriter:
    """Appends received events to the relay log in one folder. Build it with ``open``."""

    def __init__(
        self,
        index: LogIndex,
        *,
        max_file_size: int,
        server_id: int,
        preamble: Preamble | None = None,
    ) -> None:
        self.folder = index.folder
        self.max_file_size = max_file_size
        self.server_id = server_id
        self.recovery: RecoveryReport | None = None
        self._index = index
        self._fd: int | None = None
        self._name = ""
        self._offset = 0
        self._boundary = 0
        self._ctx = relay_format_context()
        self._framer = EventFramer(self._ctx)
        self._source_fde: bytes | None = None
        self._grouper = TransactionGrouper(ends_only=True)
        self._synced: RelayPosition | None = None
        self._failed: BinlakeError | None = None
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._behind = WriteBehind()
        self._preamble = preamble
        #: The group the last ``append`` completed (None if it completed none); its ``events``
        #: are only its first and its last (``TransactionGrouper(ends_only=True)``).
        self.last_group: EventGroup | None = None

    @classmethod
    def open(
        cls,
        folder: Path,
        *,
        basename: str = DEFAULT_BASENAME,
        max_file_size: int = DEFAULT_MAX_FILE_SIZE,
        server_id: int = 0,
        scan_from: str | None = None,
        preamble: Preamble | None = None,
    ) -> RelayLogWriter:
        """Recover the relay log in ``folder`` (creating it if new) and start a new file in it."""
        folder = Path(folder)
        make_folder(folder, "relay log")
        index = LogIndex(folder / f"{basename}.index")
        if not index.exists() and not index_temp_copies(index.path):
            index.write_lines([])
        report = recover_log(folder, scan_from=scan_from, index_name=index.path.name)
        writer = cls(index, max_file_size=max_file_size, server_id=server_id, preamble=preamble)
        writer.recovery = report
        writer._switch_to_new_file()
        return writer

    # ---- state ------------------------------------------------------------------------------

    @property
    def position(self) -> RelayPosition:
        """The end of the last event appended (durable only once ``sync`` has returned it)."""
        return RelayPosition(self._name, self._offset)

    @property
    def boundary(self) -> RelayPosition:
        """The end of the last complete transaction (or control event) appended."""
        return RelayPosition(self._name, self._boundary)

    @property
    def synced(self) -> RelayPosition | None:
        """What the last ``sync`` made durable."""
        return self._synced

    @property
    def format_context(self) -> FormatContext:
        """The format context the next event is read in (the source's newest
        FORMAT_DESCRIPTION, or binlake's own before one arrived)."""
        return self._ctx

    @property
    def in_transaction(self) -> bool:
        return self._grouper.in_group

    @property
    def run_codes(self) -> frozenset[int]:
        """The type codes ``append_rows_run`` may take in the current format (a caller tests
        an event's type code against it before the call)."""
        return self._framer.run_codes

    @property
    def files(self) -> list[str]:
        return self._index.names()

    @property
    def failed(self) -> BinlakeError | None:
        return self._failed

    def _require_open(self) -> int:
        if self._failed is not None:
            raise RelayLogStateError(
                f"the relay log writer failed earlier ({self._failed}) and accepts nothing more",
                file=self._name,
            )
        if self._fd is None:
            raise RelayLogStateError("the relay log writer is closed", file=self._name)
        return self._fd

    # ---- appending --------------------------------------------------------------------------

    def append(self, event: bytes, *, crc_checked: bool = False) -> None:
        """Verify ``event`` and append it verbatim (``position`` is then its end, not durable).

        A bad event (short, wrong length, CRC32 mismatch, malformed, an XID with no open
        transaction) raises its typed format error and nothing is written. ``crc_checked``: the
        caller verified this bytes object's CRC32 itself (see the module docstring).
        """
        if (
            crc_checked
            and len(event) > _TYPE_AT
            and event[_TYPE_AT] in self._framer.run_codes
            and self.append_rows_run((event,), 0)
        ):
            return  # a rows event or ANNOTATE_ROWS inside a transaction: checked, written
        fd = self._require_open()
        crash_point("relay_before_append")
        decoded = self._verify(event, crc_checked)
        group = self._grouper.feed(decoded)
        self._buffer(fd, (event,), len(event))
        crash_point("relay_after_append")
        self._offset += len(event)
        if type(decoded.payload) is FormatContext:
            self._ctx = self._framer.context = decoded.payload
            self._source_fde = bytes(event)
        if group is not None:
            self._boundary = self._offset
        self.last_group = group

    def append_rows_run(self, events: Sequence[bytes], start: int) -> int:
        """Append, from ``events[start]``, the run of rows events (and ANNOTATE_ROWS) that lie
        inside the open transaction, each framed (type and size; their CRC32s checked by the
        caller, as ``crc_checked`` says for ``append``) and gathered as one step: the
        receiver's path for the bulk of a stream. Returns the index of the first event not
        taken (``start`` when that one is not such an event, or no transaction is open): the
        caller appends that one with ``append``."""
        if not self._grouper.keeps_ends_inside_transaction:
            return start
        end = self._framer.rows_run_end(events, start)
        if end > start:
            run = events[start:end]
            self._append_framed(self._require_open(), run, sum(map(len, run)))
            self.last_group = None  # none of them ends a transaction, nor stays in its group
        return end

    def append_transactions(
        self,
        events: Sequence[bytes],
        start: int,
        *,
        plain_maps: Container[bytes],
        lasts: Mapping[int, MariaGtid],
        limit: int,
        until_pos: int = 0,
        max_bytes: int = FLUSH_BYTES,
    ) -> TransactionRun:
        """Append, from ``events[start]``, the run of whole transactions ``scan_transactions``
        takes (received events, CRC32s checked by the caller; ``plain_maps``: the TABLE_MAP
        bodies that need no source fact; ``lasts``, ``limit``, ``until_pos``, ``max_bytes``: see
        there), as
        ``append`` would append them one by one, in one step. Returns the run (``end`` is
        ``start`` when none was taken: outside a transaction's boundary, or the first is not
        of those shapes); ``last_group`` is then None: the caller takes the run instead."""
        if self._grouper.in_group:
            return TransactionRun(start)
        maps = (self._framer.table_maps, plain_maps)
        run = scan_transactions(
            events, start, self._framer, maps, lasts, limit, until_pos, max_bytes
        )
        if run.transactions:
            fd = self._require_open()
            if armed():  # each event passes the crash points, as ``append`` passes them
                for i in range(start, run.end):
                    self._append_framed(fd, events[i : i + 1], len(events[i]))
            else:
                self._append_framed(fd, events[start : run.end], run.nbytes)
            self._boundary = self._grouper.boundary = self._offset
            self.last_group = None
        return run

    def _append_framed(self, fd: int, events: Sequence[bytes], size: int) -> None:
        crash_point("relay_before_append")
        self._buffer(fd, events, size)
        crash_point("relay_after_append")
        self._offset += size

    def _verify(self, event: bytes, crc_checked: bool) -> BinlogEvent:
        if len(event) < HEADER_LEN:
            raise TruncatedEventError(
                f"received event is {len(event)} bytes, shorter than a header",
                hint="the event was not written; re-fetch from the relay log's boundary",
            )
        if crc_checked and type(event) is bytes:
            return self._framer.frame(event, self._offset)
        return decode_event(
            event, self._ctx, self._offset, crc_checked=crc_checked, rows_images=False
        )

    def _buffer(self, fd: int, events: Sequence[bytes], size: int) -> None:
        """Gather ``events`` (``size`` bytes in all) for the next hand-over."""
        if should_crash("relay_mid_event"):
            self._tear(fd, events[0])
        self._pending.extend(events)
        self._pending_bytes += size
        if self._pending_bytes >= FLUSH_BYTES:
            self._flush(fd)

    def _tear(self, fd: int, data: bytes) -> None:
        """Crash point ``relay_mid_event``: what is gathered and half of ``data`` go to the OS
        (a torn write), then the process dies."""
        self._flush_and_wait(fd)
        os.write(fd, data[: len(data) // 2])
        die()

    def _flush(self, fd: int) -> None:
        """Hand the gathered events to the write-behind thread (relay/write_behind.py), which
        writes them and starts their writeback."""
        pending, self._pending = self._pending, []
        nbytes, self._pending_bytes = self._pending_bytes, 0
        if not pending:
            return
        try:
            self._behind.submit(fd, pending, nbytes)
        except OSError as exc:
            self._fail(exc, "appending to the relay log")

    def _flush_and_wait(self, fd: int) -> None:
        """Everything appended is in the OS (before an fsync or any other use of ``fd``)."""
        self._flush(fd)
        try:
            self._behind.drain()
        except OSError as exc:
            self._fail(exc, "appending to the relay log")

    def _fail(self, exc: OSError, action: str) -> None:
        try:
            raise_os_error(exc, self.folder / self._name, action)
        except BinlakeError as error:
            self._failed = error
            raise

    # ---- durability -------------------------------------------------------------------------

    def sync(self) -> RelayPosition:
        """fsync the current file; returns the position now durable. May rotate (see module)."""
        fd = self._require_open()
        self._flush_and_wait(fd)
        crash_point("relay_before_fsync")
        self._guarded(lambda: fsync_fd(fd, "relay", self.folder / self._name))
        crash_point("relay_after_fsync")
        self._synced = self.position
        if self._offset >= self.max_file_size and not self._grouper.in_group:
            self._guarded(self._switch_to_new_file)
        return self._synced

    def rotate(self) -> RelayPosition:
        """Close the current file and start the next one (e.g. the source rotated)."""
        self._require_open()
        if self._grouper.in_group:
            raise RelayLogStateError(
                "cannot rotate inside a transaction", file=self._name, offset=self._offset
            )
        self._guarded(self._switch_to_new_file)
        return self.position

    def _guarded(self, step: Callable[[], None]) -> None:
        """Run ``step``; any error leaves the writer failed (never retry after a failed fsync)."""
        try:
            step()
        except BinlakeError as error:
            self._failed = error
            raise

    def _switch_to_new_file(self) -> None:
        old_fd, old_name = self._fd, self._name
        if old_fd is not None:
            self._flush_and_wait(old_fd)
            fsync_fd(old_fd, "relay", self.folder / old_name)
        name = self._next_name()
        self._index.write_marker(Marker(MarkerOp.CREATE, (name,)))
        header = MAGIC + format_description_event(int(time.time()), self.server_id)
        header += self._source_fde or b""
        if self._preamble is not None:
            header += self._preamble(self._ctx)
        new_fd = self._create(name, header)
        try:
            crash_point("relay_rotate_before_index")
            self._index.append(name)
        except BinlakeError:
            os.close(new_fd)  # the marker stays: the next open removes the unlisted file
            raise
        crash_point("relay_rotate_after_index")
        self._fd, self._name = new_fd, name
        self._offset = self._boundary = len(header)
        self._grouper = TransactionGrouper(ends_only=True)
        if old_fd is not None:
            self._close_file(old_fd, old_name)
        self._index.remove_marker()

    def _next_name(self) -> str:
        numbers = [sequence_number(n) or 0 for n in self._index.names()]
        base = self._index.path.stem
        return f"{base}.{max(numbers, default=0) + 1:06d}"

    def _create(self, name: str, header: bytes) -> int:
        path = self.folder / name
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o640)
        except OSError as exc:
            raise_os_error(exc, path, "creating a relay log file")
        try:
            write_all(fd, (header,))
            fsync_fd(fd, "relay", path)
        except OSError as exc:
            os.close(fd)
            raise_os_error(exc, path, "writing a relay log file header")
        except BinlakeError:
            os.close(fd)
            raise
        fsync_dir(self.folder, "relay")
        return fd

    def _close_file(self, fd: int, name: str) -> None:
        """Clear IN_USE in place (its data is already fsynced) and fsync; then close."""
        path = self.folder / name
        try:
            crash_point("relay_close_before_flag")
            clear_in_use(fd, path)
        except OSError as exc:
            raise_os_error(exc, path, "clearing the IN_USE flag")
        finally:
            os.close(fd)

    def close(self) -> None:
        """Clean close: fsync, clear IN_USE, fsync. Inside a transaction or after a failure the
        flag stays set so that recovery checks the tail at the next open. Either way the
        write-behind thread has finished with the descriptor before it is closed."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        if self._failed is not None or self._grouper.in_group:
            self._abandon(fd)
            return
        try:
            self._flush_and_wait(fd)
            fsync_fd(fd, "relay", self.folder / self._name)
        except BinlakeError:
            self._abandon(fd)
            raise
        self._close_file(fd, self._name)

    def _abandon(self, fd: int) -> None:
        """Close ``fd`` unsynced (its tail is recovery's to check), once the queued writes are
        done (a write error is already the writer's failure, or moot now)."""
        with contextlib.suppress(OSError):
            self._behind.drain()
        os.close(fd)

    def purge(self, up_to: str, *, keep_from: str) -> list[str]:
        """Remove relay files before ``up_to``; never ``keep_from`` (the caller's checkpoint),
        anything newer, or the file being written. Returns the names removed."""
        self._require_open()
        return self._index.purge(up_to, keep_from=keep_from)

    def __enter__(self) -> RelayLogWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
