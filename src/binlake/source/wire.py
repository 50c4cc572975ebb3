"""Raw packets on the socket of an authenticated connection.

Why our own reader instead of PyMySQL's ``_read_packet``: PyMySQL is used for what it does well
(TCP/TLS connect, the handshake and its auth plugins, the SQL statements), but its packet reader
turns every socket problem into a generic ``OperationalError``, cannot tell a read timeout from a
reset, reads through an 8 KiB buffered file object and builds a ``MysqlPacket`` object per
event. The dump stream is one-way and long-lived, so after the last SQL statement binlake reads
the socket itself (``recv_into`` into one large reusable buffer), which gives exact control of:

* partial reads: a packet is complete only when all its bytes are in; a short read, a reset or
  EOF mid-packet is ``SourceConnectionLostError`` and nothing of that packet is returned;
* continuation: a logical packet of 0xFFFFFF bytes or more arrives as several physical packets
  (each 0xFFFFFF bytes, the last one shorter, possibly empty); they are joined;
* sequence ids: each physical packet must carry the next id (mod 256);
* timeouts: a socket timeout is a silent peer, not a generic error.

Switching readers is safe because the protocol is strictly request/response until the dump
starts: when PyMySQL has read the reply to our last statement, the server has nothing more to
say, so PyMySQL's buffered reader holds no bytes that ours would miss. Any mistake there would
show up at once as a sequence-id error, never as silently misframed data.
"""

from __future__ import annotations

import socket
from typing import Final

from binlake.errors import SourceConnectionLostError, SourceProtocolError
from binlake.source.packets import MAX_PACKET_CHUNK, PACKET_HEADER_LEN, frame_packet

DEFAULT_BUFFER_SIZE: Final = 1 << 20


class PacketReader:
    """Reads whole logical packets from ``sock``; see the module docstring.

    ``timeout_s`` bounds each wait for bytes: no byte for that long raises
    SourceConnectionLostError (``timed_out=True``).
    """

    def __init__(
        self,
        sock: socket.socket,
        *,
        timeout_s: float,
        first_seq: int = 1,
        buffer_size: int = DEFAULT_BUFFER_SIZE,
    ) -> None:
        self._sock = sock
        self._timeout_s = timeout_s
        self._buf = bytearray(buffer_size)
        self._view = memoryview(self._buf)
        self._start = 0  # first unread byte
        self._end = 0  # end of valid bytes
        self.next_seq = first_seq
        self.bytes_received = 0
        sock.settimeout(timeout_s)

    @property
    def timeout_s(self) -> float:
        return self._timeout_s

    def expect_seq(self, seq: int) -> None:
        """The sequence id the next physical packet must carry (a new command resets it)."""
        self.next_seq = seq % 256

    def read_packet(self) -> bytes:
        """The next logical packet's payload, continuation packets joined."""
        length = self._read_header()
        first = self._take(length)
        if length < MAX_PACKET_CHUNK:
            return first
        parts = [first]
        while length == MAX_PACKET_CHUNK:
            length = self._read_header()
            parts.append(self._take(length))
        return b"".join(parts)

    # ---- internals ---------------------------------------------------------------------------

    def _read_header(self) -> int:
        self._ensure(PACKET_HEADER_LEN)
        view, start = self._view, self._start
        length = view[start] | (view[start + 1] << 8) | (view[start + 2] << 16)
        seq = view[start + 3]
        self._start = start + PACKET_HEADER_LEN
        if seq != self.next_seq:
            raise SourceProtocolError(
                f"packet sequence id {seq}, expected {self.next_seq}: the stream is out of step"
            )
        self.next_seq = (seq + 1) % 256
        return length

    def _take(self, n: int) -> bytes:
        """Exactly ``n`` bytes as a new bytes object (one copy)."""
        if n <= len(self._buf):
            self._ensure(n)
            out = bytes(self._view[self._start : self._start + n])
            self._start += n
            return out
        return self._take_large(n)

    def _take_large(self, n: int) -> bytes:
        """A packet larger than the buffer: what is buffered, then straight into its own array."""
        out = bytearray(n)
        have = min(n, self._end - self._start)
        out[:have] = self._view[self._start : self._start + have]
        self._start += have
        target = memoryview(out)
        while have < n:
            have += self._recv_into(target[have:], missing=n - have)
        return bytes(out)

    def _ensure(self, n: int) -> None:
        """At least ``n`` unread bytes in the buffer (``n`` <= buffer size)."""
        if self._end - self._start >= n:
            return
        if self._start + n > len(self._buf):  # compact: move the unread tail to the front
            pending = self._end - self._start
            self._view[:pending] = self._view[self._start : self._end]
            self._start, self._end = 0, pending
        while self._end - self._start < n:
            self._end += self._recv_into(
                self._view[self._end :], missing=n - (self._end - self._start)
            )

    def _recv_into(self, target: memoryview, missing: int) -> int:
        try:
            got = self._sock.recv_into(target)
        except TimeoutError:
            raise SourceConnectionLostError(
                f"no data from the source for {self._timeout_s:g}s "
                f"(heartbeats should arrive every {self._timeout_s / 2:g}s)",
                timed_out=True,
            ) from None
        except OSError as exc:
            raise SourceConnectionLostError(
                f"connection lost with {missing} byte(s) of a packet missing: {exc}"
            ) from exc
        if got == 0:
            raise SourceConnectionLostError(
                f"the source closed the connection with {missing} byte(s) of a packet missing"
                if missing
                else "the source closed the connection"
            )
        self.bytes_received += got
        return got


def send_packet(sock: socket.socket, payload: bytes, seq: int = 0) -> int:
    """Send one logical packet from sequence id ``seq``; returns the next id."""
    frame, next_seq = frame_packet(payload, seq)
    try:
        sock.sendall(frame)
    except TimeoutError:
        raise SourceConnectionLostError("timed out sending to the source", timed_out=True) from None
    except OSError as exc:
        raise SourceConnectionLostError(f"connection lost while sending: {exc}") from exc
    return next_seq
