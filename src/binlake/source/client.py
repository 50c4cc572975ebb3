"""The replication client: connect to a MySQL/MariaDB source and stream its binlog events.

``SourceConnection.open`` logs in with PyMySQL (TCP, TLS, handshake, auth plugins) and reads
``ServerInfo``; ``dump`` then speaks the dump protocol on raw packets (see ``binlake.source.wire``
for why binlake reads the socket itself) and yields every event as its exact bytes, each one
CRC32-verified before it is yielded.

Session set-up before the dump, per flavor:

* MariaDB: ``@master_binlog_checksum`` (the server's own ``@@binlog_checksum``: we understand it),
  ``@master_heartbeat_period`` (ns), ``@mariadb_slave_capability=4`` (else the server rewrites GTID
  events for old replicas); GTID mode adds ``@slave_connect_state``, ``@slave_gtid_strict_mode=1``
  and ``@slave_gtid_ignore_duplicates=0``, then COM_BINLOG_DUMP with an empty file name.
  BINLOG_SEND_ANNOTATE_ROWS_EVENT is always requested, so the stream holds every event of the
  server's files (without it the server drops Annotate_rows events).
* MySQL: the ``master_`` and ``source_`` spellings of the checksum and heartbeat variables, then
  COM_BINLOG_DUMP (file/position) or COM_BINLOG_DUMP_GTID with the encoded GTID set.

Then COM_REGISTER_SLAVE (our ``server_id``; no user or password is reported), then the dump.
A second dump with the same ``server_id`` makes the server drop the first one, so every
concurrent reader of one source needs its own ``server_id``.
"""

from __future__ import annotations

import socket
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType, TracebackType
from typing import Any, Self, TypeVar, cast

import pymysql

from binlake.binlog.format import Flavor, flavor_of
from binlake.errors import SourceConfigError, SourceError
from binlake.source import packets
from binlake.source.errmap import map_dump_error, map_pymysql_error
from binlake.source.event_check import EventChecker
from binlake.source.settings import ConnectionSettings, open_connection
from binlake.source.wire import PacketReader, send_packet

T = TypeVar("T")

#: Timeout of the SQL statements around the dump (SHOW BINARY LOGS on a big server is slow).
QUERY_TIMEOUT_S = 60.0
ER_NO_BINARY_LOGGING = 1381
ER_SPECIFIC_ACCESS_DENIED = 1227

SERVER_VARIABLES = (
    "log_bin",
    "log_bin_basename",
    "binlog_format",
    "binlog_row_image",
    "binlog_row_metadata",
    "binlog_checksum",
    "binlog_annotate_row_events",
    "binlog_transaction_compression",
    "encrypt_binlog",
    "server_id",
    "server_uuid",
    "gtid_mode",
    "gtid_executed",
    "gtid_binlog_pos",
    "gtid_domain_id",
    "gtid_strict_mode",
    "max_allowed_packet",
    "max_binlog_size",
    "version_comment",
)


@dataclass(frozen=True)
class DumpStart:
    """Where a dump starts: a file and position, or (``gtid_state`` set) after a GTID state.

    ``gtid_state`` is a MariaDB position ``d-s-n,...`` or a MySQL GTID set (the transactions we
    already have); ``""`` means from the first transaction the source has. With neither a file
    nor a GTID state the dump starts at the source's first binlog file.
    """

    file: str | None = None
    position: int = 4
    gtid_state: str | None = None

    def __post_init__(self) -> None:
        if self.file is not None and self.gtid_state is not None:
            raise ValueError("DumpStart takes a file/position or a GTID state, not both")
        if not 4 <= self.position <= 0xFFFFFFFF:
            raise ValueError(f"binlog position {self.position} is not in 4..4294967295")

    @property
    def gtid_mode(self) -> bool:
        return self.gtid_state is not None

    def describe(self) -> str:
        if self.gtid_state is not None:
            return f"GTID state {self.gtid_state!r}"
        return f"{self.file or '(first binlog)'}:{self.position}"


@dataclass(frozen=True)
class ServerInfo:
    """What the source told us at connect time."""

    version: str
    flavor: Flavor
    server_id: int
    server_uuid: str | None
    #: MariaDB ``@@gtid_binlog_pos`` / MySQL ``@@gtid_executed``.
    gtid_binlog_pos: str | None
    #: SHOW BINARY LOGS as (name, size); empty when binlog is off or the user may not list them.
    binlog_files: tuple[tuple[str, int], ...]
    variables: Mapping[str, str]

    @property
    def log_bin(self) -> bool:
        return self.variables.get("log_bin", "").upper() == "ON"

    @property
    def binlog_checksum(self) -> str:
        return self.variables.get("binlog_checksum", "NONE").upper()


class SourceConnection:
    """One logged-in connection to the source; serves SQL until ``dump`` turns it into a
    binlog stream. Close it (or use ``with``)."""

    def __init__(
        self, settings: ConnectionSettings, conn: pymysql.connections.Connection[Any]
    ) -> None:
        self.settings = settings
        self._conn = conn
        self._dumping = False
        self._closed = False
        self._reader: PacketReader | None = None
        self.server = self._read_server_info()

    @classmethod
    def open(cls, settings: ConnectionSettings) -> SourceConnection:
        """Connect and log in; unreachable host, bad login and the like raise typed errors."""
        try:
            conn = open_connection(settings)
        except (pymysql.err.MySQLError, RuntimeError, OSError) as exc:
            raise map_pymysql_error(exc, settings, during="connect") from exc
        try:
            set_query_timeouts(conn)
            return cls(settings, conn)
        except BaseException:
            _force_close(conn)
            raise

    # ---- SQL before the dump ---------------------------------------------------------------

    def query(self, sql: str, args: tuple[Any, ...] | None = None) -> list[tuple[Any, ...]]:
        """Run one statement and return its rows (before ``dump`` only)."""
        if self._dumping or self._closed:
            raise RuntimeError("this connection is streaming a binlog or closed; open another")
        try:
            with self._conn.cursor() as cursor:
                cursor.execute(sql, args)
                return [tuple(row) for row in cursor.fetchall()]
        except pymysql.err.MySQLError as exc:
            raise map_pymysql_error(exc, self.settings, during=_statement_name(sql)) from exc

    def _read_server_info(self) -> ServerInfo:
        ((version,),) = self.query("SELECT VERSION()")
        names = ", ".join(f"'{name}'" for name in SERVER_VARIABLES)
        rows = self.query(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({names})")
        variables = {str(name).lower(): str(value) for name, value in rows}
        flavor = flavor_of(str(version))
        gtid_var = "gtid_binlog_pos" if flavor is Flavor.MARIADB else "gtid_executed"
        return ServerInfo(
            version=str(version),
            flavor=flavor,
            server_id=int(variables.get("server_id", "0")),
            server_uuid=variables.get("server_uuid"),
            gtid_binlog_pos=variables.get(gtid_var),
            binlog_files=self._binlog_files(),
            variables=MappingProxyType(variables),
        )

    def _binlog_files(self) -> tuple[tuple[str, int], ...]:
        try:
            rows = self.query("SHOW BINARY LOGS")
        except SourceError as exc:
            if exc.code in (ER_NO_BINARY_LOGGING, ER_SPECIFIC_ACCESS_DENIED):
                return ()
            raise
        return tuple((str(row[0]), int(row[1])) for row in rows)

    # ---- the dump ----------------------------------------------------------------------------

    def dump(
        self,
        start: DumpStart,
        *,
        non_blocking: bool = False,
        allow_unchecksummed: bool = False,
    ) -> Iterator[bytes]:
        """Start streaming from ``start``; yields each event's exact bytes (header .. CRC).

        Set-up (SET statements, COM_REGISTER_SLAVE, the dump command) runs now, so refusals
        such as a missing privilege raise here; what the server says about the position (error
        1236) arrives as the first packet and raises on the first ``next``.

        The stream includes the artificial ROTATE and FORMAT_DESCRIPTION the server sends
        first, and HEARTBEAT events. ``non_blocking``: the server sends EOF at the end of its
        binlog and the iterator ends; otherwise it waits for new events forever. Events are
        verified against the checksum the current FORMAT_DESCRIPTION declares; a binlog written
        without checksums is refused unless ``allow_unchecksummed``.
        """
        reader, checker = self._start_dump(start, non_blocking, allow_unchecksummed)
        return self._stream(reader.events(checker), checker, start)

    def dump_batches(
        self, start: DumpStart, *, non_blocking: bool = False
    ) -> Iterator[list[bytes]]:
        """``dump``'s stream in batches: a batch holds the events already read when the next
        read from the socket is due (which may block), so a reader thread hands events over
        once per batch, not once per event."""
        reader, checker = self._start_dump(start, non_blocking, allow_unchecksummed=False)
        return self._stream(reader.event_batches(checker), checker, start)

    def _start_dump(
        self, start: DumpStart, non_blocking: bool, allow_unchecksummed: bool
    ) -> tuple[PacketReader, EventChecker]:
        if self._dumping or self._closed:
            raise RuntimeError("a SourceConnection serves one dump; open another connection")
        self._check_can_dump(allow_unchecksummed)
        for statement in self._session_statements(start):
            self.query(statement)
        self._dumping = True
        reader = self._reader = PacketReader(self._socket(), timeout_s=self.settings.read_timeout_s)
        self._register(reader)
        self._send_command(reader, self._dump_command(start, non_blocking))
        checker = EventChecker(
            negotiated_checksum=self.server.binlog_checksum,
            allow_unchecksummed=allow_unchecksummed,
        )
        return reader, checker

    def _check_can_dump(self, allow_unchecksummed: bool) -> None:
        if not self.server.log_bin:
            raise SourceConfigError(
                f"the source {self.settings.address} has binary logging off (log_bin=OFF)",
                hint="enable it: `log_bin = mysql-bin` under [mysqld] in my.cnf, then restart "
                "the server (log_bin cannot be changed at runtime)",
                host=self.settings.host,
                port=self.settings.port,
                setting="log_bin",
            )
        if self.server.binlog_checksum != "CRC32" and not allow_unchecksummed:
            raise SourceConfigError(
                f"the source writes binlog_checksum={self.server.binlog_checksum}; binlake "
                "verifies every event's CRC32",
                hint="SET GLOBAL binlog_checksum = 'CRC32'; and `binlog_checksum = CRC32` "
                "under [mysqld] in my.cnf",
                host=self.settings.host,
                port=self.settings.port,
                setting="binlog_checksum",
            )

    def _session_statements(self, start: DumpStart) -> list[str]:
        checksum, period = self.server.binlog_checksum, self.settings.heartbeat_period_s
        try:
            if self.server.flavor is Flavor.MARIADB:
                return packets.mariadb_session_statements(checksum, period, start.gtid_state)
            return packets.mysql_session_statements(checksum, period)
        except packets.PacketEncodingError as exc:
            raise ValueError(f"cannot start a dump at {start.describe()}: {exc}") from exc

    def _dump_command(self, start: DumpStart, non_blocking: bool) -> bytes:
        server_id = self.settings.server_id
        block = packets.BINLOG_DUMP_NON_BLOCK if non_blocking else 0
        if self.server.flavor is Flavor.MARIADB:
            flags = block | packets.BINLOG_SEND_ANNOTATE_ROWS_EVENT
            if start.gtid_mode:
                return packets.encode_binlog_dump(server_id, "", 4, flags)
            return packets.encode_binlog_dump(server_id, start.file or "", start.position, flags)
        if start.gtid_state is not None:
            try:
                gtid_set = packets.encode_mysql_gtid_set(start.gtid_state)
            except packets.PacketEncodingError as exc:
                raise ValueError(f"cannot start a dump at {start.describe()}: {exc}") from exc
            flags = block | packets.BINLOG_THROUGH_GTID
            return packets.encode_binlog_dump_gtid(server_id, gtid_set, flags=flags)
        return packets.encode_binlog_dump(server_id, start.file or "", start.position, block)

    def _register(self, reader: PacketReader) -> None:
        """COM_REGISTER_SLAVE; the server answers OK or an error packet."""
        self._send_command(reader, packets.encode_register_slave(self.settings.server_id))
        reply = reader.read_packet()
        if reply[:1] == bytes([packets.ERR_HEADER]):
            raise map_dump_error(packets.decode_err_packet(reply), self.settings, None)
        if reply[:1] != bytes([packets.OK_HEADER]):
            raise SourceError(
                f"unexpected reply to COM_REGISTER_SLAVE: {reply[:16].hex()}",
                host=self.settings.host,
                port=self.settings.port,
            )

    def _send_command(self, reader: PacketReader, payload: bytes) -> None:
        send_packet(self._socket(), payload, seq=0)
        reader.expect_seq(1)

    def _stream(
        self, items: Generator[T, None, bytes], checker: EventChecker, start: DumpStart
    ) -> Iterator[T]:
        """``items``' events (or batches), then what ended them: EOF ends the iterator, an
        error packet is the typed error it maps to."""
        last = yield from items
        if packets.is_eof_packet(last):
            return
        if last[:1] == bytes([packets.ERR_HEADER]):
            error = packets.decode_err_packet(last)
            raise map_dump_error(error, self.settings, start.describe())
        raise checker.protocol_error(f"unexpected packet {last[:16].hex()}")

    def _socket(self) -> socket.socket:
        sock = cast(Any, self._conn)._sock
        if sock is None:
            raise SourceError("the connection to the source is closed")
        return cast(socket.socket, sock)

    @property
    def bytes_received(self) -> int:
        """Bytes read from the socket since the dump started (framing included)."""
        return self._reader.bytes_received if self._reader is not None else 0

    # ---- life cycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection; a dumping one is dropped without COM_QUIT (the server is
        writing, not reading). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._dumping:
            _force_close(self._conn)
            return
        try:
            self._conn.close()
        except pymysql.err.Error:
            _force_close(self._conn)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "dumping" if self._dumping else "open"
        return f"SourceConnection({self.settings.user}@{self.settings.address}, {state})"


def set_query_timeouts(conn: pymysql.connections.Connection[Any]) -> None:
    """After login, statements get QUERY_TIMEOUT_S (PyMySQL has no public setter; it applies
    these attributes before each read and write)."""
    raw = cast(Any, conn)
    raw._read_timeout = QUERY_TIMEOUT_S
    raw._write_timeout = QUERY_TIMEOUT_S


def _force_close(conn: pymysql.connections.Connection[Any]) -> None:
    cast(Any, conn)._force_close()


def _statement_name(sql: str) -> str:
    """The first words of a statement, for messages (never its values)."""
    return " ".join(sql.split()[:3])
