"""One text-protocol result set, read from a PyMySQL connection's socket as blocks of whole row
packets (a chunk task's hot path: no Python object per value).

PyMySQL connects, authenticates (its auth plugins, TLS) and runs the small statements of a
session; a chunk's SELECT is then sent here as COM_QUERY on the same socket and its reply read
here. The protocol is request/response: once PyMySQL has read the reply to its last statement
the server has nothing more to say, and once this reader has read the final EOF packet PyMySQL
can send the next statement. The bytes go into one large buffer (``recv_into``); a tight loop
over the 4-byte packet headers finds the whole packets buffered; each ``RowBlock`` (a numpy
byte array and the payload offsets of its rows) is handed on to columnar decoding.

Framing is checked, never trusted:

* every physical packet carries the next sequence id (``SourceProtocolError`` otherwise);
* a payload of 0xFFFFFF bytes continues in the next packet (joined: rows of 16 MiB or more);
* an ERR packet is the server's ``SourceError`` with its code (``KILL QUERY`` gives 1317, a
  killed connection 1927: ``SourceConnectionLostError``, which a Spark task retry answers);
* a socket that closes or stays silent past the read timeout is ``SourceConnectionLostError``;
* the connection must not have negotiated CLIENT_DEPRECATE_EOF (PyMySQL does not): the result
  then ends with a classic EOF packet (0xFE, payload shorter than 9 bytes), which no row packet
  can look like (a row whose first cell is 8 MiB or more starts 0xFE but is longer).
"""

from __future__ import annotations

import importlib
import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from binlake.binlog import rowplan
from binlake.errors import SourceConnectionLostError, SourceError, SourceProtocolError


def load_native() -> ModuleType | None:
    """The C twin of the framing loop here and of ``cells.binary_views`` (``_textcells.c``) when
    this process runs the compiled modules, else None (``rowplan.NATIVE`` tells: the build
    record names ``_textcells.c`` too, so a current build has both and a stale one neither)."""
    if rowplan.NATIVE is None:
        return None
    return importlib.import_module("binlake.snapshot._textcells")


#: The C extension, or None: pure Python (``BINLAKE_PURE_PYTHON=1``, no build, a stale build).
NATIVE: Final = load_native()

COM_QUERY: Final = 0x03
MAX_PAYLOAD: Final = 0xFFFFFF
EOF_HEADER: Final = 0xFE
ERR_HEADER: Final = 0xFF
EOF_MAX_PAYLOAD: Final = 9
#: Bytes read from the socket per block (a block holds whole packets only).
DEFAULT_BLOCK_BYTES: Final = 4 << 20
#: Zero bytes after the rows of a block (room for fixed-width gathers at its last cell).
PADDING: Final = 64
#: Server errors that end the connection (retried by a new task attempt).
_LOST_CODES: Final = frozenset({1053, 1317, 1927, 2006, 2013})
_u32 = struct.Struct("<I").unpack_from

Bytes = npt.NDArray[np.uint8]
Offsets = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class ColumnPacket:
    """The fields of a column definition packet a chunk checks."""

    name: str
    charset: int
    length: int
    type_code: int
    flags: int
    decimals: int


@dataclass(frozen=True, slots=True)
class RowBlock:
    """Whole row packets: ``data`` holds them (then ``PADDING`` zero bytes); row ``i``'s
    payload is ``data[starts[i]:ends[i]]``."""

    data: Bytes
    starts: Offsets
    ends: Offsets

    @property
    def rows(self) -> int:
        return len(self.starts)


class TextResultReader:
    """Runs one SELECT on ``connection`` (a PyMySQL connection with no result pending)."""

    def __init__(
        self,
        connection: Any,
        *,
        block_bytes: int = DEFAULT_BLOCK_BYTES,
        timeout_s: float = 600.0,
        where: str = "the source",
    ) -> None:
        self._sock: socket.socket = connection._sock
        self._sock.settimeout(timeout_s)
        self._buf = bytearray(block_bytes)
        self._view = memoryview(self._buf)
        self._start = 0
        self._end = 0
        self._seq = 0
        self._where = where

    # ---- the query -----------------------------------------------------------------------

    def query(self, sql: str) -> tuple[list[ColumnPacket], Iterator[RowBlock]]:
        """Send ``sql``; its column definitions, and its rows as blocks (to be read to the end
        before the connection is used again)."""
        payload = bytes([COM_QUERY]) + sql.encode("utf-8")
        if len(payload) >= MAX_PAYLOAD:
            raise SourceProtocolError("a chunk query longer than 16 MiB")
        try:
            self._sock.sendall(len(payload).to_bytes(3, "little") + b"\x00" + payload)
        except OSError as exc:
            raise self._lost(f"sending the chunk query: {exc}") from None
        self._seq = 1
        first = self._packet()
        if first[0] == ERR_HEADER:
            raise self._server_error(first)
        if first[0] == 0x00:
            raise SourceProtocolError("the chunk query returned no result set")
        count = _lenenc_int(first, 0)[0]
        columns = [_column_definition(self._packet()) for _ in range(count)]
        eof = self._packet()
        if not (eof[0] == EOF_HEADER and len(eof) < EOF_MAX_PAYLOAD):
            raise SourceProtocolError("no EOF packet after the column definitions")
        return columns, self._blocks()

    # ---- rows ----------------------------------------------------------------------------

    def _blocks(self) -> Iterator[RowBlock]:
        while True:
            block, finished = self._scan()
            if block is not None and block.rows:
                yield block
            if finished:
                return
            if not self._whole_packet_buffered():
                self._refill()

    def _whole_packet_buffered(self) -> bool:
        have = self._end - self._start
        return have >= 4 and 4 + (_u32(self._buf, self._start)[0] & 0xFFFFFF) <= have

    def _frame(self) -> tuple[Offsets, int]:
        """Payload offsets of the whole packets buffered from ``_start``, and where the first
        packet not wholly buffered starts (header reads only: the hot loop, in C when
        ``NATIVE`` is loaded)."""
        if NATIVE is None:
            bodies, pos = frame_packets(self._buf, self._start, self._end)
            return np.array(bodies, dtype=np.int64), pos
        raw, pos = NATIVE.frame(self._buf, self._start, self._end)
        return np.frombuffer(raw, dtype=np.int64), pos

    def _scan(self) -> tuple[RowBlock | None, bool]:
        """The rows among the whole packets buffered now, and whether the result ended."""
        start = self._start
        bodies, pos = self._frame()
        if not len(bodies):
            if self._end - pos >= 4 and 4 + (_u32(self._buf, pos)[0] & 0xFFFFFF) > len(self._buf):
                return self._long_row(), False  # larger than the buffer: read piecewise
            return None, False
        data = np.frombuffer(self._view[start:pos], dtype=np.uint8)
        at = bodies - start
        lengths = _le24(data, at - 4)
        seq = (self._seq + np.arange(len(at), dtype=np.int64)) & 0xFF
        if not np.array_equal(data[at - 1], seq):
            wrong = int(np.argmax(data[at - 1] != seq))
            raise SourceProtocolError(
                f"packet sequence id {data[at[wrong] - 1]}, expected {seq[wrong]}"
            )
        first = np.where(lengths > 0, data[np.minimum(at, len(data) - 1)], -1)
        stop = ((first == EOF_HEADER) & (lengths < EOF_MAX_PAYLOAD)) | (first == ERR_HEADER)
        stop |= lengths == MAX_PAYLOAD
        rows = int(np.argmax(stop)) if stop.any() else len(at)
        finished = False
        if rows < len(at):
            finished = self._stop_at(data, at, lengths, seq, rows, start)
        else:
            self._seq = int(seq[-1] + 1) & 0xFF
            self._start = pos
        if rows == 0:
            if not finished and lengths[0] == MAX_PAYLOAD:
                return self._long_row(), False
            return None, finished
        rows_end = int(at[rows - 1] + lengths[rows - 1])
        # The block owns a copy of its packets (the receive buffer is reused at once), with
        # PADDING zero bytes after them: fixed-width gathers never run off its end.
        block = np.zeros(rows_end + PADDING, dtype=np.uint8)
        block[:rows_end] = data[:rows_end]
        return RowBlock(block, at[:rows], at[:rows] + lengths[:rows]), finished

    def _stop_at(
        self, data: Bytes, at: Offsets, lengths: Offsets, seq: Offsets, row: int, start: int
    ) -> bool:
        """Packet ``row`` is no plain row: an ERR (raised), the final EOF (True), or the first
        packet of a row of 16 MiB or more (False: ``_long_row`` reads it next)."""
        length = int(lengths[row])
        if data[at[row]] == ERR_HEADER and length != MAX_PAYLOAD:
            raise self._server_error(bytes(data[at[row] : at[row] + length]))
        if length != MAX_PAYLOAD:
            self._seq = int(seq[row] + 1) & 0xFF
            self._start = start + int(at[row] + length)
            return True
        self._seq = int(seq[row]) & 0xFF
        self._start = start + int(at[row]) - 4
        return False

    def _long_row(self) -> RowBlock:
        """One row of 16 MiB or more: its continuation packets joined into one payload."""
        payload = self._packet()
        data = np.frombuffer(payload + bytes(PADDING), dtype=np.uint8)
        return RowBlock(data, np.zeros(1, np.int64), np.array([len(payload)], np.int64))

    # ---- packets ---------------------------------------------------------------------------

    def _packet(self) -> bytes:
        """One logical packet's payload (continuations joined)."""
        parts = []
        while True:
            length = self._header()
            parts.append(self._take(length))
            if length < MAX_PAYLOAD:
                return b"".join(parts)

    def _header(self) -> int:
        self._ensure(4)
        word = _u32(self._buf, self._start)[0]
        if word >> 24 != self._seq:
            raise SourceProtocolError(f"packet sequence id {word >> 24}, expected {self._seq}")
        self._seq = (self._seq + 1) & 0xFF
        self._start += 4
        return int(word & 0xFFFFFF)

    def _take(self, n: int) -> bytes:
        out = bytearray()
        while n:
            self._ensure(1)
            piece = min(n, self._end - self._start)
            out += self._view[self._start : self._start + piece]
            self._start += piece
            n -= piece
        return bytes(out)

    def _ensure(self, n: int) -> None:
        while self._end - self._start < n:
            self._refill()

    def _refill(self) -> None:
        """Move the unread bytes to the front and read more after them."""
        pending = self._end - self._start
        if self._start:
            self._view[:pending] = self._view[self._start : self._end]
            self._start, self._end = 0, pending
        if self._end == len(self._buf):
            raise SourceProtocolError("receive buffer full without a whole packet")
        try:
            got = self._sock.recv_into(self._view[self._end :])
        except TimeoutError:
            raise self._lost("no data before the read timeout", timed_out=True) from None
        except OSError as exc:
            raise self._lost(f"connection lost mid-result: {exc}") from None
        if got == 0:
            raise self._lost("the server closed the connection mid-result")
        self._end += got

    # ---- errors --------------------------------------------------------------------------

    def _lost(self, text: str, *, timed_out: bool = False) -> SourceConnectionLostError:
        return SourceConnectionLostError(
            f"reading a chunk from {self._where}: {text}", timed_out=timed_out
        )

    def _server_error(self, payload: bytes) -> SourceError:
        code = int.from_bytes(payload[1:3], "little")
        message = payload[3:]
        if message[:1] == b"#":
            message = message[6:]
        text = f"{self._where} error {code}: {message.decode('utf-8', 'replace')}"
        if code in _LOST_CODES:
            return SourceConnectionLostError(text, code=code)
        return SourceError(text, code=code)


def frame_packets(buf: bytearray, start: int, end: int) -> tuple[list[int], int]:
    """Payload offsets of the whole packets in ``buf[start:end]``, and where the first packet
    not wholly there starts (``_textcells.frame``'s reference)."""
    bodies: list[int] = []
    append = bodies.append
    pos = start
    while pos + 4 <= end:
        following = pos + 4 + (buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16)
        if following > end:
            break
        append(pos + 4)
        pos = following
    return bodies, pos


def _le24(data: Bytes, at: Offsets) -> Offsets:
    """The 3-byte little-endian integers at offsets ``at``."""
    b = data[at[:, None] + np.arange(3)].astype(np.int64)
    out: Offsets = b[:, 0] | b[:, 1] << 8 | b[:, 2] << 16
    return out


def _lenenc_int(data: bytes, pos: int) -> tuple[int, int]:
    first = data[pos]
    if first < 0xFB:
        return first, pos + 1
    size = {0xFC: 2, 0xFD: 3, 0xFE: 8}.get(first)
    if size is None:
        raise SourceProtocolError(f"bad length-encoded integer 0x{first:02x}")
    return int.from_bytes(data[pos + 1 : pos + 1 + size], "little"), pos + 1 + size


def _lenenc_bytes(data: bytes, pos: int) -> tuple[bytes, int]:
    length, pos = _lenenc_int(data, pos)
    return data[pos : pos + length], pos + length


def _column_definition(packet: bytes) -> ColumnPacket:
    """Protocol::ColumnDefinition41: catalog, schema, table, org_table, name, org_name, then
    the fixed fields (charset, length, type, flags, decimals)."""
    pos = 0
    fields = []
    for _ in range(6):
        value, pos = _lenenc_bytes(packet, pos)
        fields.append(value)
    _, pos = _lenenc_int(packet, pos)  # length of the fixed fields (0x0c)
    charset, length, type_code, flags, decimals = struct.unpack_from("<HIBHB", packet, pos)
    name = fields[4].decode("utf-8", "replace")
    return ColumnPacket(name, charset, length, type_code, flags, decimals)
