"""A copy's binlog positions: ``low`` before any chunk is read, ``high`` after the last one,
and a one-chunk copy's own position.

Why two positions suffice (``binlake.snapshot.copier`` has the whole argument): streaming
re-applies, as whole-row upserts and deletes by key, every change after the position a table
holds. A keyed table's copy is exact once streaming passed ``high`` if

* ``low``: every transaction logged at or before ``low`` is visible to every chunk read (the
  chunks are read after ``low`` was taken), and
* ``high``: every transaction a chunk could see is logged at or before ``high``.

``low`` must be exact, not merely "the binlog's end": the binlog is written before InnoDB
commits, so a read view taken in that window misses a transaction ``SHOW MASTER STATUS``
already counts (streaming from there would skip it). ``high`` may be later than needed (the
table is then exact from a later position), never earlier.

=========  ===============================================  =====================================
server     ``low`` (and a one-chunk copy's own position)    ``high``
=========  ===============================================  =====================================
MariaDB    ``START TRANSACTION WITH CONSISTENT SNAPSHOT``,  the same, after the last chunk
           ``SHOW STATUS LIKE 'binlog_snapshot_%'``: the
           position exactly consistent with the read view
           (the server blocks commits for the instant it
           takes it). No lock, no privilege beyond SELECT.
MySQL 8    ``LOCK TABLES t READ`` (it waits until no        the binlog's end (``SHOW BINARY LOG
           transaction that wrote ``t`` is in flight and    STATUS``, 8.2+; ``SHOW MASTER STATUS``
           holds new writers back), the binlog's end read   before): every transaction a chunk
           under it, ``UNLOCK TABLES``: writers of ``t``    saw committed in the engine, so it is
           wait for milliseconds. Needs the LOCK TABLES     logged before. Needs REPLICATION
           privilege on the table's database and            CLIENT.
           REPLICATION CLIENT. A one-chunk copy (a table
           without a key) holds the lock while its chunk
           is read: writers of the table wait for it.
=========  ===============================================  =====================================

MySQL has no ``binlog_snapshot_file`` / ``binlog_snapshot_position`` (MariaDB's status
variables); what replaces them needs the privileges above, and a missing one is a
``SnapshotUnsupportedError`` naming it. The MySQL paths are written from the server's
documented behaviour and have not been run here (no MySQL 8 server on the test machine).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final, Literal

import pymysql

from binlake.errors import SourceConnectionLostError, SourceError
from binlake.position import SourcePosition
from binlake.snapshot.columns import quote
from binlake.verify.errors import SnapshotUnsupportedError

Flavor = Literal["mariadb", "mysql"]
Query = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]
#: ER_TABLEACCESS_DENIED_ERROR, ER_DBACCESS_DENIED_ERROR, ER_SPECIFIC_ACCESS_DENIED_ERROR.
_DENIED: Final = frozenset({1142, 1044, 1227})
_LOST_CODES: Final = frozenset({1053, 1317, 1927, 2006, 2013})
MYSQL_MISSING = (
    "MySQL has no binlog_snapshot_file / binlog_snapshot_position status variables (MariaDB "
    "only); binlake takes a MySQL table's copy position under LOCK TABLES ... READ"
)


#: The consistent snapshot's binlog position (no ``%``: callers may format with arguments).
SNAPSHOT_STATUS: Final = (
    "SHOW SESSION STATUS WHERE Variable_name IN "
    "('binlog_snapshot_file', 'binlog_snapshot_position')"
)


def flavor_of(version: str) -> Flavor:
    """The server kind a ``SELECT VERSION()`` answer names."""
    return "mariadb" if "mariadb" in version.lower() else "mysql"


# ---- the driver's positions ------------------------------------------------------------------


def low_position(query: Query, flavor: Flavor, database: str, table: str) -> SourcePosition:
    """The table's ``low`` position (see the module docstring)."""
    if flavor == "mariadb":
        return consistent_position(query)
    name = f"{quote(database)}.{quote(table)}"
    try:
        query(f"LOCK TABLES {name} READ", ())
    except SourceError as error:
        raise _mysql_refused(error, f"LOCK TABLES {name} READ", "LOCK TABLES") from None
    try:
        return binlog_end(query)
    finally:
        query("UNLOCK TABLES", ())


def high_position(query: Query, flavor: Flavor) -> SourcePosition:
    """A ``high`` position, taken after the last chunk was read."""
    if flavor == "mariadb":
        return consistent_position(query)
    return binlog_end(query)


def consistent_position(query: Query) -> SourcePosition:
    """MariaDB: the position exactly consistent with a read view opened now."""
    query("START TRANSACTION WITH CONSISTENT SNAPSHOT", ())
    try:
        status = {str(k).lower(): v for k, v in query(SNAPSHOT_STATUS, ())}
    finally:
        query("ROLLBACK", ())
    return _snapshot_position(status)


def binlog_end(query: Query) -> SourcePosition:
    """The binlog's current end (``SHOW BINARY LOG STATUS``, else ``SHOW MASTER STATUS``)."""
    refused: SourceError | None = None
    for statement in ("SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"):
        try:
            rows = query(statement, ())
        except SourceError as error:
            refused = error
            continue
        if not rows or not rows[0][0]:
            raise SnapshotUnsupportedError(
                f"{statement} returned no binlog position: is log_bin off?",
                hint="enable the binary log on the source (log_bin); binlake replicates from it",
            )
        return SourcePosition(str(rows[0][0]), int(rows[0][1]))
    assert refused is not None
    raise _mysql_refused(refused, "SHOW MASTER STATUS", "REPLICATION CLIENT")


def _snapshot_position(status: dict[str, Any]) -> SourcePosition:
    file, offset = status.get("binlog_snapshot_file"), status.get("binlog_snapshot_position")
    if not file or offset is None:
        raise SnapshotUnsupportedError(
            "the source reports no binlog position for its consistent snapshot "
            "(binlog_snapshot_file is empty: is log_bin off?)",
            hint="enable the binary log on the source (log_bin); binlake replicates from it",
        )
    return SourcePosition(_text(file), int(offset))


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes | bytearray) else str(value)


def _mysql_refused(error: SourceError, statement: str, privilege: str) -> SourceError:
    if error.code not in _DENIED:
        return error
    return SnapshotUnsupportedError(
        f"{MYSQL_MISSING}, and the server refused {statement}: {error.message}",
        hint=f"GRANT {privilege} (and REPLICATION CLIENT) to binlake's user on the copied "
        "tables' databases, or copy from a MariaDB replica of the source",
        code=error.code,
    )


# ---- a task's own position (a table copied in one chunk) ---------------------------------------


def task_position(connection: Any, flavor: Flavor, database: str, table: str) -> str:
    """On a chunk task's connection: open what makes its read exact at one position (MariaDB:
    a consistent snapshot, kept open; MySQL: ``LOCK TABLES t READ``, kept until the read
    ends), and return that position as ``file:offset``."""
    where = f"{database}.{table} on {connection.host}:{connection.port}"

    def query(sql: str, args: Sequence[Any]) -> list[tuple[Any, ...]]:
        return run_statement(connection, sql, where)

    if flavor == "mariadb":
        query("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ", ())
        query("START TRANSACTION WITH CONSISTENT SNAPSHOT", ())
        rows = query(SNAPSHOT_STATUS, ())
        return str(_snapshot_position({_text(k).lower(): v for k, v in rows}))
    name = f"{quote(database)}.{quote(table)}"
    try:
        query(f"LOCK TABLES {name} READ", ())
    except SourceError as error:
        raise _mysql_refused(error, f"LOCK TABLES {name} READ", "LOCK TABLES") from None
    return str(binlog_end(query))


def run_statement(connection: Any, sql: str, where: str) -> list[tuple[Any, ...]]:
    """``sql``'s rows on a PyMySQL connection; failures as typed source errors."""
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql)
            return [tuple(row) for row in cursor.fetchall()]
    except pymysql.err.MySQLError as exc:
        code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
        text = f"{where}: {' '.join(sql.split()[:3])} failed: {exc.args[-1] if exc.args else exc}"
        if code is None or code in _LOST_CODES:
            raise SourceConnectionLostError(text, code=code) from None
        raise SourceError(text, code=code) from None
