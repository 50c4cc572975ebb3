"""Server and driver errors -> binlake's typed source errors.

Messages carry the server's own text and our host:port and user, never the password (PyMySQL's
and the server's messages do not contain it either: "using password: YES" at most).
"""

from __future__ import annotations

from typing import TypedDict

import pymysql

from binlake.errors import (
    SourceAuthError,
    SourceConfigError,
    SourceConnectionLostError,
    SourceError,
    SourcePositionLostError,
    SourceUnreachableError,
)
from binlake.source.packets import ErrPacket
from binlake.source.settings import ConnectionSettings

# Server error numbers (identical in MySQL and MariaDB).
ER_DBACCESS_DENIED = 1044
ER_ACCESS_DENIED = 1045
ER_CON_COUNT = 1040
ER_HOST_IS_BLOCKED = 1129
ER_HOST_NOT_PRIVILEGED = 1130
ER_USER_LIMIT_REACHED = 1203
ER_SPECIFIC_ACCESS_DENIED = 1227
ER_NOT_SUPPORTED_AUTH_MODE = 1251
ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236
ER_SERVER_SHUTDOWN = 1053
ER_QUERY_INTERRUPTED = 1317
ER_CONNECTION_KILLED = 1927
# Client (driver) error numbers.
CR_CONN_HOST_ERROR = 2003
CR_UNKNOWN_HOST = 2005
CR_SERVER_GONE_ERROR = 2006
CR_SERVER_LOST = 2013
CR_AUTH_PLUGIN_CANNOT_LOAD = 2059

AUTH_CODES = frozenset(
    {ER_DBACCESS_DENIED, ER_ACCESS_DENIED, ER_HOST_NOT_PRIVILEGED, ER_NOT_SUPPORTED_AUTH_MODE}
)
UNREACHABLE_CODES = frozenset(
    {CR_CONN_HOST_ERROR, CR_UNKNOWN_HOST, ER_CON_COUNT, ER_USER_LIMIT_REACHED, ER_HOST_IS_BLOCKED}
)
LOST_CODES = frozenset(
    {CR_SERVER_GONE_ERROR, CR_SERVER_LOST, ER_SERVER_SHUTDOWN, ER_CONNECTION_KILLED}
)
#: Messages of error 1236 that mean "binary logging is off", not "position lost".
BINLOG_OFF_MESSAGES = ("binary log is not open", "you are not using binary logging")
#: Messages of error 1236 for a position that is not an event start in the server's file. The
#: dump thread lifts max_allowed_packet to 1 GiB, so "exceeded max_allowed_packet" there means
#: the server read a length out of the middle of an event (measured on MariaDB 10.11).
NOT_AN_EVENT_BOUNDARY_MESSAGES = (
    "exceeded max_allowed_packet",
    "impossible position",
    "binlog truncated in the middle of event",
    "bogus data in log event",
    "event too small",
    "wrong offset or i/o error",
)
NOT_AN_EVENT_BOUNDARY_HINT = (
    "the requested position is not the start of an event in the source's binlog: the binlog "
    "was damaged or rewritten, or [source] now points at another server. Check the source; "
    "if it is right, "
    "re-snapshot with `binlake snapshot --tables ...` (binlake never skips ahead)"
)


class _Where(TypedDict):
    host: str
    port: int
    code: int | None


def _error_code(exc: BaseException) -> int | None:
    if isinstance(exc, pymysql.err.MySQLError) and exc.args and isinstance(exc.args[0], int):
        return exc.args[0]
    return None


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, pymysql.err.MySQLError) and len(exc.args) >= 2:
        return str(exc.args[1])
    return str(exc)


def map_pymysql_error(
    exc: BaseException, settings: ConnectionSettings, *, during: str
) -> SourceError:
    """A PyMySQL (or socket) failure while connecting or running ``during``."""
    code, text = _error_code(exc), _error_text(exc)
    where = _Where(host=settings.host, port=settings.port, code=code)
    message = f"{during} on {settings.address} failed: {text}"
    if code == ER_HOST_IS_BLOCKED:
        return SourceUnreachableError(
            message, hint="run `FLUSH HOSTS` on the source (too many failed logins)", **where
        )
    if code in AUTH_CODES or code == CR_AUTH_PLUGIN_CANNOT_LOAD:
        return SourceAuthError(message, user=settings.user, **where)
    if code == ER_SPECIFIC_ACCESS_DENIED:
        return SourceAuthError(message, user=settings.user, hint=_grant_hint(settings), **where)
    if isinstance(exc, RuntimeError) and "pynacl" in text.lower():
        return SourceAuthError(
            message,
            hint="the account uses MariaDB's ed25519 plugin: install the `PyNaCl` package "
            "(a binlake dependency: reinstall binlake)",
            user=settings.user,
            **where,
        )
    if isinstance(exc, RuntimeError) and "cryptography" in text:
        return SourceAuthError(
            message,
            hint="the account uses caching_sha2_password/sha256_password: install the "
            "`cryptography` package, or connect with TLS (ssl_ca)",
            user=settings.user,
            **where,
        )
    if during == "connect" and (code in UNREACHABLE_CODES | LOST_CODES or code is None):
        hint = SourceUnreachableError.default_hint
        if "ssl" in text.lower() or "certificate" in text.lower():
            hint = "check the TLS settings (ssl_ca, ssl_cert, ssl_key, ssl_verify) and the "
            hint += "server's certificate"
        return SourceUnreachableError(message, hint=hint, **where)
    if code in UNREACHABLE_CODES:
        return SourceUnreachableError(message, **where)
    if code in LOST_CODES or code is None or isinstance(exc, pymysql.err.InterfaceError):
        return SourceConnectionLostError(message, **where)  # InterfaceError: it was closed
    return SourceError(message, **where)


def _grant_hint(settings: ConnectionSettings) -> str:
    return (
        f"GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO '{settings.user}'@'%'; "
        "(MySQL and MariaDB < 10.5: REPLICATION CLIENT instead of BINLOG MONITOR); "
        "`binlake check-source --config F` checks every grant"
    )


def map_dump_error(
    error: ErrPacket, settings: ConnectionSettings, requested: str | None
) -> SourceError:
    """An error packet received in place of (or in the middle of) the binlog stream."""
    where = _Where(host=settings.host, port=settings.port, code=error.code)
    text = f"source {settings.address} error {error.code}: {error.message}"
    if error.code == ER_MASTER_FATAL_ERROR_READING_BINLOG:
        if any(m in error.message.lower() for m in BINLOG_OFF_MESSAGES):
            return SourceConfigError(
                text,
                hint="enable binary logging on the source (`log_bin` in my.cnf, then restart)",
                setting="log_bin",
                **where,
            )
        boundary = any(m in error.message.lower() for m in NOT_AN_EVENT_BOUNDARY_MESSAGES)
        return SourcePositionLostError(
            f"{text} (binlake asked for {requested})" if requested else text,
            hint=NOT_AN_EVENT_BOUNDARY_HINT if boundary else None,
            requested=requested,
            **where,
        )
    if error.code in (ER_SPECIFIC_ACCESS_DENIED, *AUTH_CODES):
        return SourceAuthError(text, user=settings.user, hint=_grant_hint(settings), **where)
    if error.code in LOST_CODES or error.code == ER_QUERY_INTERRUPTED:
        return SourceConnectionLostError(text, **where)
    return SourceError(text, **where)
