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
import struct
from collections.abc import Generator
from typing import Final, cast

from binlake.binlog.constants import CHECKSUM_LEN, HEADER_LEN, EventType
from binlake.binlog.header import crc32
from binlake.errors import SourceConnectionLostError, SourceProtocolError
from binlake.source.event_check import CRC32_RESIDUE, EventChecker
from binlake.source.packets import MAX_PACKET_CHUNK, OK_HEADER, PACKET_HEADER_LEN, frame_packet

DEFAULT_BUFFER_SIZE: Final = 1 << 20
#: Compact the buffer before a read when less than this is free after the unread bytes.
MIN_RECV: Final = 64 * 1024
#: Events that change the checker's state go through ``EventChecker.check``.
_STATEFUL_TYPES: Final = frozenset({int(EventType.FORMAT_DESCRIPTION), int(EventType.ROTATE)})
_MIN_EVENT_PAYLOAD: Final = 1 + HEADER_LEN + CHECKSUM_LEN
_MIN_EVENT_PACKET: Final = PACKET_HEADER_LEN + _MIN_EVENT_PAYLOAD
#: An event packet's first 18 bytes in one unpack: the packet header (``length | seq << 24``),
#: the OK byte, then the event header's type code and declared size.
_unpack_event_packet = struct.Struct("<IB4xB4xI").unpack_from


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
        return bytes(self.read_view())

    def read_view(self) -> memoryview:
        """The next logical packet's payload as a view valid only until the next read (a
        whole packet already buffered is sliced from the buffer without a copy)."""
        start, end, buf = self._start, self._end, self._buf
        if end - start >= PACKET_HEADER_LEN:
            length = buf[start] | (buf[start + 1] << 8) | (buf[start + 2] << 16)
            body = start + PACKET_HEADER_LEN
            if (
                end - body >= length
                and length < MAX_PACKET_CHUNK
                and buf[start + 3] == self.next_seq
            ):
                self.next_seq = (self.next_seq + 1) & 0xFF
                self._start = body + length
                return self._view[body : body + length]
        return self._read_view_slow()

    def events(self, checker: EventChecker) -> Generator[bytes, None, bytes]:
        """The events of ``event_batches`` one by one; returns what it returns."""
        batches = self.event_batches(checker)
        while True:
            try:
                batch = next(batches)
            except StopIteration as end:
                return cast(bytes, end.value)
            yield from batch

    def event_batches(self, checker: EventChecker) -> Generator[list[bytes], None, bytes]:
        """The events of a dump stream (OK packets: 0x00 + event), each verified by ``checker``
        and copied once, in batches: the events whole in the buffer, handed over before the
        next read from the socket (which may block). Returns the first payload that is not an
        event (EOF, error, junk).

        The hot path handles, without any call but the CRC, every event that is whole in the
        buffer, carries a CRC32 and is neither a FORMAT_DESCRIPTION nor a ROTATE (those change
        the checker's state). Anything else -- a refill, a continuation packet, a bad length,
        sequence id or CRC -- takes the slow path, where ``checker.check`` and the framing code
        raise the precise error. A CRC32 is checked on the hot path by the residue property:
        the CRC32 of data followed by its own little-endian CRC32 is always 0x2144DF1C.
        """
        buf, view = self._buf, self._view
        start, end, seq = self._start, self._end, self.next_seq
        try:
            while True:
                crc_on = checker.crc32_on
                batch: list[bytes] = []
                while crc_on and end - start >= _MIN_EVENT_PACKET:
                    word, ok, type_code, size = _unpack_event_packet(buf, start)
                    length = word & 0xFFFFFF
                    body = start + PACKET_HEADER_LEN
                    if (
                        end - body < length
                        or length >= MAX_PACKET_CHUNK
                        or word >> 24 != seq
                        or ok != OK_HEADER
                        or length < _MIN_EVENT_PAYLOAD
                        or size + 1 != length
                        or type_code in _STATEFUL_TYPES
                    ):
                        break
                    event = view[body + 1 : body + length]
                    if crc32(event) != CRC32_RESIDUE:
                        break
                    seq = (seq + 1) & 0xFF
                    start = body + length
                    batch.append(bytes(event))
                self._start, self.next_seq = start, seq
                if batch:
                    yield batch
                payload = self._read_view_slow()
                start, end, seq = self._start, self._end, self.next_seq
                if not payload or payload[0] != OK_HEADER:
                    return bytes(payload)
                yield [checker.check(payload[1:])]
        finally:
            self._start, self.next_seq = start, seq

    def _read_view_slow(self) -> memoryview:
        length = self._read_header()
        first = self._take(length)
        if length < MAX_PACKET_CHUNK:
            return memoryview(first)
        parts = [first]
        while length == MAX_PACKET_CHUNK:
            length = self._read_header()
            parts.append(self._take(length))
        return memoryview(b"".join(parts))

    # ---- internals ---------------------------------------------------------------------------

    def _read_header(self) -> int:
        self._ensure(PACKET_HEADER_LEN, at_boundary=True)
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

    def _ensure(self, n: int, *, at_boundary: bool = False) -> None:
        """At least ``n`` unread bytes in the buffer (``n`` <= buffer size). ``at_boundary``:
        the bytes start a new packet (a close before any of them is not a torn packet)."""
        if self._end - self._start >= n:
            return
        size = len(self._buf)
        if self._start and (self._start + n > size or size - self._end < MIN_RECV):
            # compact: move the unread bytes to the front, so the next recv has room
            pending = self._end - self._start
            self._view[:pending] = self._view[self._start : self._end]
            self._start, self._end = 0, pending
        while self._end - self._start < n:
            buffered = self._end - self._start
            missing = 0 if at_boundary and buffered == 0 else n - buffered
            self._end += self._recv_into(self._view[self._end :], missing=missing)

    def _recv_into(self, target: memoryview, missing: int) -> int:
        """One recv; ``missing``: bytes of a started packet still to come (0 between packets)."""
        try:
            got = self._sock.recv_into(target)
        except TimeoutError:
            raise SourceConnectionLostError(
                f"no data from the source for {self._timeout_s:g}s "
                f"(heartbeats should arrive every {self._timeout_s / 2:g}s)",
                timed_out=True,
            ) from None
        except OSError as exc:
            torn = f" in the middle of a packet ({missing} byte(s) missing)" if missing else ""
            raise SourceConnectionLostError(f"connection lost{torn}: {exc}") from exc
        if got == 0:
            torn = f" in the middle of a packet ({missing} byte(s) missing)" if missing else ""
            raise SourceConnectionLostError(f"the source closed the connection{torn}")
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
