"""The Py4J callback server: Java calling back into Python (``CommitMetadata`` runs a Python
``Callable`` that way, ``binlake.lake.write.commit``).

pyspark starts no callback server of its own; ``ensure_callbacks`` starts one per gateway, once,
and ``close_callbacks`` shuts down the one it started (the session's stop calls it).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import weakref
from typing import Any

from py4j.java_gateway import JavaGateway
from pyspark.java_gateway import ensure_callback_server_started
from pyspark.sql import SparkSession

_lock = threading.Lock()


#: Gateways whose callback server binlake started (closed by ``close_callbacks``).
_started: weakref.WeakSet[JavaGateway] = weakref.WeakSet()


def _gateway(spark: SparkSession) -> JavaGateway:
    gateway = spark.sparkContext._gateway
    assert gateway is not None
    return gateway


def ensure_callbacks(spark: SparkSession) -> None:
    """Start the Py4J callback server for this session's gateway, once."""
    gateway = _gateway(spark)
    with _lock:
        server = gateway.get_callback_server()
        if server is not None and getattr(server, "is_shutdown", False):
            gateway._callback_server = None  # stopped with an earlier session: start anew
        if gateway not in _started or gateway.get_callback_server() is None:
            ensure_callback_server_started(gateway)  # type: ignore[no-untyped-call]
            _started.add(gateway)


def close_callbacks(spark: SparkSession) -> None:
    """Shut down the callback server ``ensure_callbacks`` started (no-op otherwise)."""
    gateway = spark.sparkContext._gateway
    if gateway is None:
        return
    with _lock:
        if gateway in _started:
            _started.discard(gateway)
            server = gateway.get_callback_server()
            if server is not None:
                _unblock_connections(server)
            gateway.shutdown_callback_server()
            gateway._callback_server = None


def _unblock_connections(server: Any) -> None:
    """Shut down the sockets of the server's live connections first: py4j 0.10.9.9 closes a
    connection's stream while its reader thread is blocked reading it, which never returns."""
    for connection in list(getattr(server, "connections", ())):
        sock = getattr(connection, "socket", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
