"""FORMAT_DESCRIPTION events and the ``FormatContext`` every later decode takes."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import Enum

from binlake.binlog.constants import (
    CHECKSUM_LEN,
    HEADER_LEN,
    ROWS_V1_TYPES,
    ROWS_V2_TYPES,
    ChecksumAlg,
    EventType,
)
from binlake.binlog.errors import InvalidEventError

_FDE_FIXED = struct.Struct("<H50sIB")
SERVER_VERSION_LEN = 50

#: Post-header lengths that binlog v4 has used since MySQL 5.1 / MariaDB 5.3; used before any
#: FORMAT_DESCRIPTION is seen (e.g. the artificial ROTATE that starts a replication stream) and
#: for types beyond the end of an older server's table.
DEFAULT_POST_HEADER_LENGTHS: dict[int, int] = {
    EventType.START_V3: 56,
    EventType.QUERY: 13,
    EventType.ROTATE: 8,
    EventType.LOAD: 18,
    EventType.CREATE_FILE: 4,
    EventType.APPEND_BLOCK: 4,
    EventType.EXEC_LOAD: 4,
    EventType.DELETE_FILE: 4,
    EventType.NEW_LOAD: 18,
    EventType.BEGIN_LOAD_QUERY: 4,
    EventType.EXECUTE_LOAD_QUERY: 26,
    EventType.TABLE_MAP: 8,
    EventType.INCIDENT: 2,
    EventType.MYSQL_GTID: 42,
    EventType.ANONYMOUS_GTID: 42,
    EventType.BINLOG_CHECKPOINT: 4,
    EventType.MARIADB_GTID: 19,
    EventType.GTID_LIST: 4,
    EventType.QUERY_COMPRESSED: 13,
    **dict.fromkeys(ROWS_V1_TYPES, 8),
    **dict.fromkeys(ROWS_V2_TYPES, 10),
}


class Flavor(Enum):
    MARIADB = "mariadb"
    MYSQL = "mysql"


def flavor_of(server_version: str) -> Flavor:
    return Flavor.MARIADB if "mariadb" in server_version.lower() else Flavor.MYSQL


@dataclass(frozen=True, slots=True)
class FormatContext:
    """What a FORMAT_DESCRIPTION says about the events after it."""

    binlog_version: int
    server_version: str
    create_timestamp: int
    header_length: int
    post_header_lengths: tuple[int, ...]
    checksum_alg: int
    flavor: Flavor

    @classmethod
    def default(cls, checksum_alg: int = ChecksumAlg.OFF) -> FormatContext:
        """The context before any FORMAT_DESCRIPTION: v4 defaults."""
        return cls(4, "", 0, HEADER_LEN, (), checksum_alg, Flavor.MYSQL)

    @property
    def has_checksum(self) -> bool:
        return self.checksum_alg == ChecksumAlg.CRC32

    @property
    def checksum_len(self) -> int:
        return CHECKSUM_LEN if self.has_checksum else 0

    def post_header_len(self, type_code: int) -> int:
        if 0 < type_code <= len(self.post_header_lengths):
            return self.post_header_lengths[type_code - 1]
        return DEFAULT_POST_HEADER_LENGTHS.get(type_code, 0)


def has_checksum_trailer(ctx: FormatContext) -> bool:
    """Whether this FORMAT_DESCRIPTION itself ends with an algorithm byte and a CRC32.

    Servers that write the algorithm byte always write a real CRC32 on the FORMAT_DESCRIPTION,
    even when the algorithm is OFF for the events after it (measured on MariaDB 10.11).
    """
    return _supports_checksum(ctx.server_version)


def _supports_checksum(server_version: str) -> bool:
    """Servers from MySQL 5.6.1 / MariaDB 5.3 on end the FDE with a checksum-algorithm byte."""
    digits = server_version.split("-", 1)[0].split(".")
    try:
        major, minor, patch = (int("".join(c for c in d if c.isdigit()) or 0) for d in digits[:3])
    except ValueError:
        return True
    if "mariadb" in server_version.lower():
        return (major, minor) >= (5, 3)
    if server_version.startswith("binlake"):
        return True
    return (major, minor, patch) >= (5, 6, 1)


def decode_format_description(body: bytes | memoryview, event_offset: int = 0) -> FormatContext:
    """Decode a FORMAT_DESCRIPTION body: the bytes after the common header, CRC included."""
    if len(body) < _FDE_FIXED.size:
        raise InvalidEventError(
            f"format description body is {len(body)} bytes, needs at least {_FDE_FIXED.size}",
            offset=event_offset,
            event_type="Format_desc",
        )
    version, raw_server, created, header_len = _FDE_FIXED.unpack_from(body, 0)
    server_version = bytes(raw_server).split(b"\0", 1)[0].decode("ascii", "replace")
    if version != 4 or header_len != HEADER_LEN:
        raise InvalidEventError(
            f"binlog version {version} with header length {header_len}; only v4 (19) is supported",
            offset=event_offset,
            event_type="Format_desc",
            hint="binlake reads binlog v4 (MySQL 5.0+ / MariaDB); convert older logs first",
        )
    if not _supports_checksum(server_version):
        # Such a server writes no checksum at all, so nothing after this event could be
        # verified; a damaged version string would also read as one: refused either way.
        raise InvalidEventError(
            f"FORMAT_DESCRIPTION of server version {server_version!r}, which predates binlog "
            "checksums (MySQL 5.6.1, MariaDB 5.3)",
            offset=event_offset,
            event_type="Format_desc",
            hint="binlake reads binlogs with CRC32 checksums only; if the server is newer, "
            "the event is damaged",
        )
    rest = bytes(body[_FDE_FIXED.size :])
    alg = ChecksumAlg.UNDEFINED.value
    if len(rest) >= 1 + CHECKSUM_LEN:
        alg = rest[-1 - CHECKSUM_LEN]
        lengths = rest[: -1 - CHECKSUM_LEN]
        if alg not in (ChecksumAlg.OFF, ChecksumAlg.CRC32):
            raise InvalidEventError(
                f"unknown checksum algorithm {alg}",
                offset=event_offset,
                event_type="Format_desc",
            )
    else:
        lengths = rest
    if alg == ChecksumAlg.UNDEFINED:
        alg = ChecksumAlg.OFF
    return FormatContext(
        binlog_version=version,
        server_version=server_version,
        create_timestamp=created,
        header_length=header_len,
        post_header_lengths=tuple(lengths),
        checksum_alg=int(alg),
        flavor=flavor_of(server_version),
    )


def encode_format_description_body(ctx: FormatContext) -> bytes:
    """The body of a FORMAT_DESCRIPTION for ``ctx``, without the CRC trailer.

    The checksum-algorithm byte is always written (every v4 server we support writes it); the
    event encoder adds the CRC32 trailer, which a FORMAT_DESCRIPTION always has.
    """
    raw_server = ctx.server_version.encode("ascii")[:SERVER_VERSION_LEN]
    return (
        _FDE_FIXED.pack(
            ctx.binlog_version,
            raw_server.ljust(SERVER_VERSION_LEN, b"\0"),
            ctx.create_timestamp,
            ctx.header_length,
        )
        + bytes(ctx.post_header_lengths)
        + bytes([ctx.checksum_alg])
    )
