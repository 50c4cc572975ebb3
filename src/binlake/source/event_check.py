"""Checks every event of a dump stream before it is passed on.

The checksum in force follows the stream: before the first FORMAT_DESCRIPTION it is the one we
negotiated (``@master_binlog_checksum``; the server computes the artificial ROTATE's CRC with
it), afterwards the one the latest FORMAT_DESCRIPTION declares (HEARTBEAT events use it too).
A FORMAT_DESCRIPTION's own CRC32 is always checked. ``check`` either returns the event or
raises; a bad event is never passed on.
"""

from __future__ import annotations

import struct

from binlake.binlog.constants import (
    CHECKSUM_LEN,
    HEADER_LEN,
    ChecksumAlg,
    EventFlag,
    EventType,
    event_type_name,
)
from binlake.binlog.format import decode_format_description, has_checksum_trailer
from binlake.binlog.header import crc32, event_crc
from binlake.errors import (
    BinlogFormatError,
    ChecksumMismatchError,
    SourceConfigError,
    SourceProtocolError,
)

_HEADER = struct.Struct("<4xBxxxxIIH")  # type, size, log_pos, flags
_CRC = struct.Struct("<I")
_unpack_header = _HEADER.unpack_from
_unpack_crc = _CRC.unpack_from
_FORMAT_DESCRIPTION = int(EventType.FORMAT_DESCRIPTION)
_ROTATE = int(EventType.ROTATE)
_MIN_CRC_EVENT = HEADER_LEN + CHECKSUM_LEN
#: CRC32 (zlib's) of any data followed by its own CRC32 in little-endian order.
CRC32_RESIDUE = 0x2144DF1C
_ROTATE_POS = struct.Struct("<Q")


class EventChecker:
    """Per-dump state: checksum in force and the source file the events come from."""

    def __init__(self, *, negotiated_checksum: str, allow_unchecksummed: bool = False) -> None:
        self.checksum_alg = (
            ChecksumAlg.CRC32 if negotiated_checksum.upper() == "CRC32" else ChecksumAlg.OFF
        )
        self.allow_unchecksummed = allow_unchecksummed
        #: The source binlog file of the events (from the latest ROTATE), None before one.
        self.file: str | None = None
        self.crc32_on = self.checksum_alg == ChecksumAlg.CRC32

    def check(self, event: bytes | memoryview) -> bytes:
        """Verify one event (its exact bytes, header .. CRC) and return it as ``bytes``."""
        n = len(event)
        if n < HEADER_LEN:
            raise self.protocol_error(f"event of {n} bytes is shorter than a header")
        type_code, size, log_pos, flags = _unpack_header(event)
        if size != n:
            raise self.protocol_error(
                f"{event_type_name(type_code)} event declares {size} bytes, its packet has {n}"
            )
        if type_code == _FORMAT_DESCRIPTION:
            self._format_description(bytes(event), log_pos, flags)
        elif self.crc32_on:
            if n < _MIN_CRC_EVENT:
                raise self.protocol_error(f"event of {n} bytes has no room for its CRC32")
            if crc32(event) != CRC32_RESIDUE:
                self._crc_mismatch(event, type_code, log_pos, flags)
        if type_code == _ROTATE:
            self._rotate(event)
        return bytes(event)

    def protocol_error(self, message: str) -> SourceProtocolError:
        where = f" (streaming {self.file})" if self.file else ""
        return SourceProtocolError(message + where)

    def _offset(self, size: int, log_pos: int, flags: int) -> int | None:
        """The event's offset in the source file, when its header says."""
        if log_pos == 0 or flags & EventFlag.ARTIFICIAL or log_pos < size:
            return None
        return log_pos - size

    def _crc_mismatch(
        self, event: bytes | memoryview, type_code: int, log_pos: int, flags: int
    ) -> None:
        end = len(event) - CHECKSUM_LEN
        stored = _CRC.unpack_from(event, end)[0]
        computed = crc32(event[:end])
        raise ChecksumMismatchError(
            f"CRC32 stored {stored:#010x}, computed {computed:#010x} (received from the "
            "source; not passed on)",
            file=self.file,
            offset=self._offset(len(event), log_pos, flags),
            event_type=event_type_name(type_code),
        )

    def _format_description(self, event: bytes, log_pos: int, flags: int) -> None:
        try:
            ctx = decode_format_description(memoryview(event)[HEADER_LEN:])
        except BinlogFormatError as exc:
            raise exc.with_location(file=self.file) from None
        if has_checksum_trailer(ctx):
            stored = _CRC.unpack_from(event, len(event) - CHECKSUM_LEN)[0]
            computed = event_crc(event)
            if stored != computed:
                raise ChecksumMismatchError(
                    f"CRC32 stored {stored:#010x}, computed {computed:#010x}",
                    file=self.file,
                    offset=self._offset(len(event), log_pos, flags),
                    event_type="Format_desc",
                )
        self.checksum_alg = ChecksumAlg(ctx.checksum_alg)
        self.crc32_on = self.checksum_alg == ChecksumAlg.CRC32
        if self.checksum_alg != ChecksumAlg.CRC32 and not self.allow_unchecksummed:
            raise SourceConfigError(
                f"binlog {self.file} was written without event checksums; binlake verifies "
                "every event's CRC32",
                hint="SET GLOBAL binlog_checksum = 'CRC32' (and in my.cnf), FLUSH BINARY LOGS, "
                "and start from a file written after that",
                setting="binlog_checksum",
            )

    def _rotate(self, event: bytes | memoryview) -> None:
        end = len(event) - (CHECKSUM_LEN if self.checksum_alg == ChecksumAlg.CRC32 else 0)
        if end < HEADER_LEN + _ROTATE_POS.size:
            raise self.protocol_error(f"ROTATE event of {len(event)} bytes is too short")
        name = event[HEADER_LEN + _ROTATE_POS.size : end]
        self.file = bytes(name).decode("utf-8", "replace")
