"""Short read-only queries on the source, over one lazy connection that comes back after a loss.

``SourceQueries.run(statements, during)`` runs its statements, in order, on one connection (a
session setting such as ``time_zone`` holds for the statements after it) and returns the last
one's rows. With a ``ReconnectPolicy`` a lost or refused connection is opened anew after the
receiver's backoff and the whole call runs again (``source.reconnect``); without one the typed
error is raised at once (the receiver's own facts queries: a failure there is a lost connection
for the receiver, which reconnects its stream and asks again).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from typing import Any

import pymysql

from binlake.source.errmap import map_pymysql_error
from binlake.source.reconnect import Notify, ReconnectPolicy, retrying
from binlake.source.settings import ConnectionSettings, connect_args

Statement = tuple[str, tuple[Any, ...]]


class SourceQueries:
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

    def run(self, statements: Sequence[Statement], during: str) -> list[tuple[Any, ...]]:
        """The last statement's rows (see the module docstring)."""
        if self.policy is None:
            return self._run_once(statements, during)
        return retrying(
            lambda: self._run_once(statements, during),
            self.policy,
            reset=self.close,
            notify=self.notify,
            stop=self.stop,
        )

    def _run_once(self, statements: Sequence[Statement], during: str) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = []
        if self._conn is None:
            try:
                self._conn = pymysql.connect(**connect_args(self.settings))
            except (pymysql.err.MySQLError, RuntimeError, OSError) as exc:
                raise map_pymysql_error(exc, self.settings, during="connect") from exc
        try:
            with self._conn.cursor() as cursor:
                for sql, args in statements:
                    cursor.execute(sql, args)
                    rows = [tuple(row) for row in cursor.fetchall()]
            return rows
        except (pymysql.err.MySQLError, OSError) as exc:
            self.close()
            raise map_pymysql_error(exc, self.settings, during=during) from exc

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(pymysql.err.MySQLError, OSError):
                conn.close()
