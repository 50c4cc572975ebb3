"""The source side of `verify`: a consistent snapshot, its binlog position, and streamed rows.

``SnapshotSession.begin`` runs ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` (REPEATABLE READ)
and reads MariaDB's ``binlog_snapshot_file`` / ``binlog_snapshot_position`` status variables in
that transaction: the binlog position P the snapshot is consistent with (MariaDB blocks commits
to the binlog while it takes the snapshot, so every transaction before P is visible and none
after it). Rows are read with an unbuffered cursor, in batches, never all at once. The session
runs in UTC so that TIMESTAMP columns read as UTC.

InnoDB (and other MVCC engines) only: a MyISAM table is read as it is at read time.

With a ``ReconnectPolicy`` the session comes back after a lost connection, with the receiver's
backoff (``source.reconnect``; the first connection is not retried, so a wrong host or password
shows at once): a statement outside a snapshot is run again on a new connection;
inside one, the connection is dropped and the error raised, and the owner of the snapshot (a
snapshot chunk, a verify attempt) runs its whole snapshot again through ``retrying``: nothing
read in a lost snapshot is ever mixed with rows of another.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self, TypeVar

import pymysql
import pymysql.cursors

from binlake.binlog.names import TableName
from binlake.errors import SourceConnectionLostError, SourceError
from binlake.position import SourcePosition
from binlake.source.client import set_query_timeouts
from binlake.source.errmap import map_pymysql_error
from binlake.source.reconnect import Notify, ReconnectPolicy, retrying
from binlake.source.settings import ConnectionSettings, connect_args
from binlake.verify.canonical import VerifyColumn, quote_sql, source_expression
from binlake.verify.errors import SnapshotUnsupportedError

FETCH_ROWS = 2000
T = TypeVar("T")


@dataclass(frozen=True)
class SourceColumn:
    name: str
    #: information_schema DATA_TYPE, lower case.
    data_type: str


@dataclass(frozen=True)
class SourceTable:
    name: TableName
    columns: tuple[SourceColumn, ...]
    #: Primary key column names in key order; () without one.
    key: tuple[str, ...]


class SnapshotSession:
    """One connection holding one consistent snapshot at a time (see the module docstring for
    ``policy``)."""

    def __init__(
        self,
        settings: ConnectionSettings,
        policy: ReconnectPolicy | None = None,
        *,
        notify: Notify | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        self.settings = settings
        self.policy = policy
        self.notify = notify
        self.stop = stop
        self._conn: Any = None
        self._in_snapshot = False
        self.version = ""
        self._connect()  # not retried: a wrong host or password shows at once

    def retrying(self, action: Callable[[], T]) -> T:
        """``action()`` on a live connection; with a policy, after a lost connection the
        connection is opened again and ``action`` runs again from its start (it must be whole:
        a statement outside a snapshot, or a snapshot from ``begin`` to ``end``)."""

        def attempt() -> T:
            self._connect()
            return action()

        if self.policy is None:
            return attempt()
        return retrying(attempt, self.policy, reset=self._drop, notify=self.notify, stop=self.stop)

    def _connect(self) -> None:
        if self._conn is not None:
            return
        try:
            conn = pymysql.connect(**connect_args(self.settings))
        except (pymysql.err.MySQLError, RuntimeError, OSError) as exc:
            raise map_pymysql_error(exc, self.settings, during="connect") from exc
        set_query_timeouts(conn)
        self._conn = conn
        ((version,),) = self._query("SELECT VERSION()")
        self.version = str(version)
        self._query("SET SESSION time_zone = '+00:00'")
        self._query("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")

    def _drop(self) -> None:
        """Forget a connection that failed (a snapshot on it is gone with it)."""
        conn, self._conn = self._conn, None
        self._in_snapshot = False
        if conn is not None:
            with contextlib.suppress(pymysql.err.Error, OSError):
                conn.close()

    def _failed(self, exc: BaseException, during: str) -> SourceError:
        error = map_pymysql_error(exc, self.settings, during=during)
        if error.retryable:
            self._drop()
        return error

    def _query(self, sql: str, args: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        if self._conn is None:
            raise SourceConnectionLostError(
                f"the connection to {self.settings.address} was lost",
                host=self.settings.host,
                port=self.settings.port,
            )
        try:
            with self._conn.cursor() as cursor:
                cursor.execute(sql, args)
                return [tuple(row) for row in cursor.fetchall()]
        except (pymysql.err.MySQLError, OSError) as exc:
            raise self._failed(exc, " ".join(sql.split()[:3])) from exc

    def begin(self) -> SourcePosition:
        """Open a consistent snapshot; returns the binlog position it is consistent with."""
        self._connect()
        if "mariadb" not in self.version.lower():
            raise SnapshotUnsupportedError(
                f"the source runs MySQL {self.version}: binlake verify needs MariaDB's "
                "binlog_snapshot_file / binlog_snapshot_position",
                host=self.settings.host,
                port=self.settings.port,
            )
        self._query("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        self._in_snapshot = True
        rows = dict(self._query("SHOW SESSION STATUS LIKE 'binlog_snapshot_%'"))
        file, position = rows.get("Binlog_snapshot_file"), rows.get("Binlog_snapshot_position")
        if not file or position is None:
            self.end()
            raise SnapshotUnsupportedError(
                "the source reports no binlog position for its consistent snapshot "
                "(binlog_snapshot_file is empty: is log_bin off?)",
                hint="enable the binary log on the source (log_bin); binlake replicates from it",
                host=self.settings.host,
                port=self.settings.port,
            )
        return SourcePosition(str(file), int(position))

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """``sql``'s rows (a failure is the mapped ``SourceError``, with the server's code);
        outside a snapshot, run again after a lost connection (with a policy)."""
        if self._in_snapshot:
            return self._query(sql, args)
        return self.retrying(lambda: self._query(sql, args))

    def stream(self, sql: str, args: Sequence[Any] = ()) -> Iterator[tuple[Any, ...]]:
        """``sql``'s rows, fetched in batches from an unbuffered cursor."""
        yield from self._unbuffered(sql, args, " ".join(sql.split()[:3]))

    def _unbuffered(
        self, sql: str, args: Sequence[Any] | None, during: str
    ) -> Iterator[tuple[Any, ...]]:
        if self._conn is None:
            self._query("SELECT 1")  # raises: the connection was lost
        cursor = self._conn.cursor(pymysql.cursors.SSCursor)
        try:
            cursor.execute(sql, args)
            while batch := cursor.fetchmany(FETCH_ROWS):
                yield from batch
        except (pymysql.err.MySQLError, OSError) as exc:
            _abandon(cursor)
            raise self._failed(exc, during) from exc
        finally:
            # PyMySQL reads the rest of the result when an unbuffered cursor closes, which
            # fails on a broken connection (even with AttributeError): the failure was raised.
            with contextlib.suppress(pymysql.err.MySQLError, OSError, AttributeError):
                cursor.close()

    def end(self) -> None:
        """Close the snapshot (ROLLBACK: it only read); nothing to do when the connection that
        held it is gone (then or now: the error that ended it is the one raised)."""
        if self._conn is None:
            return
        self._in_snapshot = False
        try:
            self._query("ROLLBACK")
        except SourceError as error:
            if not error.retryable:
                raise

    def base_tables(self) -> list[TableName]:
        """Every base table, sorted."""
        rows = self.query(
            "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
            "WHERE TABLE_TYPE = 'BASE TABLE'"
        )
        return sorted(TableName(str(db), str(name)) for db, name in rows)

    def describe(self, table: TableName) -> SourceTable | None:
        """Columns (in order) and primary key of ``table``; None if it does not exist."""
        database, name = table.database, table.table
        columns = self._query(
            "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
            (database, name),
        )
        if not columns:
            return None
        key = self._query(
            "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s "
            "AND TABLE_NAME = %s AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX",
            (database, name),
        )
        return SourceTable(
            table,
            tuple(SourceColumn(str(c), str(t).lower()) for c, t in columns),
            tuple(str(row[0]) for row in key),
        )

    def count(self, table: TableName) -> int:
        """The table's row count in the snapshot."""
        database, name = table.database, table.table
        ((rows,),) = self._query(f"SELECT COUNT(*) FROM {quote_sql(database)}.{quote_sql(name)}")
        return int(rows)

    def rows(self, table: TableName, columns: Sequence[VerifyColumn]) -> Iterator[tuple[Any, ...]]:
        """The table's rows in the snapshot, each value read by ``source_expression``."""
        database, name = table.database, table.table
        select = ", ".join(source_expression(c) for c in columns)
        sql = f"SELECT {select} FROM {quote_sql(database)}.{quote_sql(name)}"
        yield from self._unbuffered(sql, None, f"SELECT FROM {table}")

    def close(self) -> None:
        self._drop()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _abandon(cursor: Any) -> None:
    """Tell an unbuffered result on a broken connection not to read the rest of its rows (its
    finalizer would read a closed socket)."""
    result = getattr(cursor, "_result", None)
    if result is not None:
        result.unbuffered_active = False
