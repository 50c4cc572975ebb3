"""The control socket between a test and its power-cut daemon: one JSON request a connection,
one JSON reply, on an abstract Unix socket (Linux; no file to clean up, no path length limit).

Requests: ``{"command": "ping"}``, ``{"command": "stats"}``, ``{"command": "sync-all"}``,
``{"command": "cut", "tear": null | 512 | 4096, "seed": null | int}``. Replies:
``{"ok": true, "result": {...}}`` or ``{"ok": false, "error": "..."}``.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from typing import Any

Handler = Callable[[dict[str, Any]], dict[str, Any]]


class PowerCutError(RuntimeError):
    """The power-cut daemon refused or failed a request, or did not answer."""


def _address(name: str) -> str:
    return "\0" + name


def serve(name: str, handler: Handler) -> threading.Thread:
    """Answer requests on the socket ``name`` in a daemon thread (started, returned)."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(_address(name))
    server.listen(8)

    def loop() -> None:
        while True:
            connection, _ = server.accept()
            with connection:
                try:
                    request = json.loads(_read_line(connection))
                    reply = {"ok": True, "result": handler(request)}
                except Exception as error:  # the test gets every failure as a reply
                    reply = {"ok": False, "error": f"{type(error).__name__}: {error}"}
                connection.sendall(json.dumps(reply).encode() + b"\n")

    thread = threading.Thread(target=loop, name="powercut-control", daemon=True)
    thread.start()
    return thread


def request(name: str, command: dict[str, Any], timeout_s: float = 60.0) -> dict[str, Any]:
    """Send ``command`` ({"command": ..., and its arguments}) to the daemon at ``name``; the
    reply's result."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.settimeout(timeout_s)
            connection.connect(_address(name))
            connection.sendall(json.dumps(command).encode() + b"\n")
            reply = json.loads(_read_line(connection))
    except (OSError, ValueError) as error:
        raise PowerCutError(f"power-cut daemon {name}: {command}: {error}") from error
    if not reply["ok"]:
        raise PowerCutError(f"power-cut daemon {name}: {command}: {reply['error']}")
    result: dict[str, Any] = reply["result"]
    return result


def _read_line(connection: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = connection.recv(65536)
        if not chunk:
            raise ConnectionError("the connection closed before a whole line")
        data += chunk
    return data
