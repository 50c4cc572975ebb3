"""A loopback TCP proxy that injects network faults between binlake and a test server.

    with TcpProxy(target_port=sandbox.port) as proxy:
        settings = ConnectionSettings(host=proxy.host, port=proxy.port, ...)
        ...
        proxy.stall(5.0)            # forward nothing, either way, for 5 s (bytes wait, not lost)
        proxy.drop()                # close every connection now (FIN)
        proxy.reset()               # abort every connection now (RST: SO_LINGER 0)
        proxy.cut_after(500_000)    # forward 500000 more bytes to the client, then RST
        proxy.cut_after(10, reset=False)  # ... then FIN: a truncated stream
        proxy.reject_new = True     # accept new connections and close them at once
        proxy.reject_next(2)        # ... only the next two

Faults apply to the connections open at the time of the call; new connections are forwarded
normally (unless ``reject_new``). One thread per connection (plus the accept thread), all daemon
threads, bound to 127.0.0.1 only. The proxy stops by itself after ``lifetime_s`` (default 120 s)
so a forgotten proxy cannot outlive its test by long; ``stop()`` (or leaving the ``with``) stops
it at once and closes every connection.

Counters: ``connections`` (accepted so far), ``bytes_to_client`` / ``bytes_to_server`` (total
forwarded).
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading
import time
from types import TracebackType
from typing import Self

LOOPBACK = "127.0.0.1"
CHUNK = 64 * 1024
POLL_S = 0.02


def _abort(sock: socket.socket) -> None:
    """Close with RST instead of FIN."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()


class _Link:
    """One proxied connection: client <-> upstream, pumped by one thread."""

    def __init__(self, proxy: TcpProxy, client: socket.socket, upstream: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.upstream = upstream
        self.paused_until = 0.0
        self.cut_remaining: int | None = None
        self.cut_with_reset = True
        self.ending: str | None = None  # "drop" | "reset", set by another thread
        self.thread = threading.Thread(target=self._run, name="tcp-proxy-link", daemon=True)

    def _run(self) -> None:
        try:
            self._pump()
        except OSError:
            pass
        finally:
            if self.ending == "reset":
                _abort(self.client)
            else:
                _close(self.client)
            _close(self.upstream)
            self.proxy._forget(self)

    def _pump(self) -> None:
        peers = {self.client: self.upstream, self.upstream: self.client}
        while self.ending is None and not self.proxy._stopping.is_set():
            if time.monotonic() < self.paused_until:
                time.sleep(POLL_S)
                continue
            readable, _, _ = select.select(list(peers), [], [], POLL_S)
            for sock in readable:
                data = sock.recv(CHUNK)
                if not data:
                    return
                if sock is self.upstream:
                    if not self._to_client(data):
                        return
                else:
                    self.upstream.sendall(data)
                    self.proxy.bytes_to_server += len(data)

    def _to_client(self, data: bytes) -> bool:
        """Forward ``data``, honouring a pending cut; False when the cut has happened."""
        if self.cut_remaining is not None and len(data) >= self.cut_remaining:
            self.client.sendall(data[: self.cut_remaining])
            self.proxy.bytes_to_client += self.cut_remaining
            self.ending = "reset" if self.cut_with_reset else "drop"
            return False
        self.client.sendall(data)
        self.proxy.bytes_to_client += len(data)
        if self.cut_remaining is not None:
            self.cut_remaining -= len(data)
        return True


class TcpProxy:
    """See the module docstring."""

    host = LOOPBACK

    def __init__(
        self, target_port: int, target_host: str = LOOPBACK, *, lifetime_s: float = 120.0
    ) -> None:
        self.target = (target_host, target_port)
        self.lifetime_s = lifetime_s
        self.reject_new = False
        self._reject_count = 0
        self._cut_next: int | None = None
        self.connections = 0
        self.bytes_to_client = 0
        self.bytes_to_server = 0
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((LOOPBACK, 0))
        self._listener.listen(16)
        self._listener.settimeout(POLL_S * 5)
        self.port: int = self._listener.getsockname()[1]
        self._links: list[_Link] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._accept_loop, name="tcp-proxy", daemon=True)

    # ---- life cycle -----------------------------------------------------------------------------

    def start(self) -> Self:
        self._deadline = time.monotonic() + self.lifetime_s
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, close every connection and wait for the threads (bounded)."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        for link in self._snapshot():
            link.thread.join(timeout=5)
        _close(self._listener)

    def __enter__(self) -> Self:
        return self if self._thread.is_alive() else self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # ---- faults ---------------------------------------------------------------------------------

    def stall(self, seconds: float) -> None:
        """Forward nothing in either direction for ``seconds`` (bytes queue up, none is lost)."""
        until = time.monotonic() + seconds
        for link in self._snapshot():
            link.paused_until = until

    def drop(self) -> None:
        """Close every open connection now, with FIN on both sides."""
        for link in self._snapshot():
            link.ending = "drop"

    def reset(self) -> None:
        """Abort every open connection now: the client gets RST (ECONNRESET)."""
        for link in self._snapshot():
            link.ending = "reset"

    def cut_after(self, nbytes: int, *, reset: bool = True) -> None:
        """Forward ``nbytes`` more bytes server -> client on each open connection, then end it
        (RST, or FIN with ``reset=False``): the client sees a stream truncated at that byte."""
        for link in self._snapshot():
            link.cut_with_reset = reset
            link.cut_remaining = nbytes

    @property
    def open_connections(self) -> int:
        return len(self._snapshot())

    # ---- internals ------------------------------------------------------------------------------

    def _snapshot(self) -> list[_Link]:
        with self._lock:
            return list(self._links)

    def _forget(self, link: _Link) -> None:
        with self._lock:
            if link in self._links:
                self._links.remove(link)

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            if time.monotonic() > self._deadline:
                self._stopping.set()
                break
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                break
            self._serve(client)

    def reject_next(self, count: int) -> None:
        """Close the next ``count`` new connections at once (then forward again)."""
        self._reject_count = count

    def cut_next_after(self, nbytes: int) -> None:
        """Forward ``nbytes`` server -> client on the next new connection, then reset it."""
        self._cut_next = nbytes

    def _serve(self, client: socket.socket) -> None:
        self.connections += 1
        if self.reject_new or self._reject_count > 0:
            self._reject_count -= 1
            _close(client)
            return
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            _abort(client)
            return
        for sock in (client, upstream):
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        link = _Link(self, client, upstream)
        if self._cut_next is not None:
            link.cut_with_reset, link.cut_remaining = True, self._cut_next
            self._cut_next = None
        with self._lock:
            self._links.append(link)
        link.thread.start()
