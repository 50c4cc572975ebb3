"""Pure encoders and decoders of the client/server protocol packets the dump session uses.

Nothing here touches a socket: every function maps values to bytes (or bytes to values), so each
packet can be checked byte by byte in unit tests. Lengths are always computed from the encoded
bytes (``len(payload)``), never counted by hand: a declared length one byte short is exactly the
python-mysql-replication MariaDB GTID bug (the server resets the connection).

Packet framing (MySQL client/server protocol): every packet is ``int<3> payload_length``,
``int<1> sequence_id``, then the payload. A payload of 0xFFFFFF bytes or more is split into
chunks of 0xFFFFFF bytes, each with the next sequence id; a chunk shorter than 0xFFFFFF ends the
payload, so a payload whose length is an exact multiple of 0xFFFFFF ends with an empty packet.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from binlake.gtid import MysqlGtidSet

MAX_PACKET_CHUNK = 0xFFFFFF
PACKET_HEADER_LEN = 4

COM_BINLOG_DUMP = 0x12
COM_REGISTER_SLAVE = 0x15
COM_BINLOG_DUMP_GTID = 0x1E

#: COM_BINLOG_DUMP flags. NON_BLOCK: send an EOF packet at the end instead of waiting.
BINLOG_DUMP_NON_BLOCK = 0x01
#: MariaDB only: also send ANNOTATE_ROWS events (without it the server drops them).
BINLOG_SEND_ANNOTATE_ROWS_EVENT = 0x02
#: COM_BINLOG_DUMP_GTID (MySQL) flags.
BINLOG_THROUGH_POSITION = 0x02
BINLOG_THROUGH_GTID = 0x04

#: ``@mariadb_slave_capability``: 4 = MARIA_SLAVE_CAPABILITY_GTID, the highest MariaDB defines
#: (10.0 to 11.x). Below it the server rewrites GTID and other MariaDB events into old forms.
MARIADB_SLAVE_CAPABILITY_GTID = 4

OK_HEADER = 0x00
EOF_HEADER = 0xFE
ERR_HEADER = 0xFF
#: An EOF packet is 0xFE with a payload shorter than 9 bytes; 0xFE followed by more is data.
EOF_MAX_PAYLOAD = 9

_U32_MAX = 0xFFFFFFFF
_U64_MAX = 0xFFFFFFFFFFFFFFFF


class PacketEncodingError(ValueError):
    """A value cannot be encoded in the field the protocol gives it."""


# ---- framing -------------------------------------------------------------------------------


def frame_packet(payload: bytes, seq: int = 0) -> tuple[bytes, int]:
    """The wire bytes of ``payload`` sent from sequence id ``seq``, and the next sequence id."""
    out = bytearray()
    pos = 0
    while True:
        chunk = payload[pos : pos + MAX_PACKET_CHUNK]
        out += len(chunk).to_bytes(3, "little") + bytes([seq])
        out += chunk
        seq = (seq + 1) % 256
        pos += len(chunk)
        if len(chunk) < MAX_PACKET_CHUNK:
            return bytes(out), seq


def parse_packet_header(header: bytes | memoryview) -> tuple[int, int]:
    """``(payload_length, sequence_id)`` of a 4-byte packet header."""
    if len(header) != PACKET_HEADER_LEN:
        raise PacketEncodingError(f"a packet header is 4 bytes, got {len(header)}")
    return int.from_bytes(header[:3], "little"), header[3]


# ---- commands ------------------------------------------------------------------------------


def _u(n: int, value: int, name: str) -> bytes:
    if not 0 <= value < (1 << (8 * n)):
        raise PacketEncodingError(f"{name}={value} does not fit in {n} unsigned bytes")
    return value.to_bytes(n, "little")


def _lenenc_short(raw: bytes, name: str) -> bytes:
    """A string with a 1-byte length prefix (COM_REGISTER_SLAVE's fields)."""
    if len(raw) > 0xFF:
        raise PacketEncodingError(f"{name} is {len(raw)} bytes; at most 255 fit")
    return bytes([len(raw)]) + raw


def encode_register_slave(
    server_id: int,
    *,
    report_host: str = "",
    report_user: str = "",
    report_password: str = "",
    report_port: int = 0,
    master_id: int = 0,
) -> bytes:
    """COM_REGISTER_SLAVE payload (command byte included).

    ``int<1> 0x15, int<4> server_id, int<1>+string hostname, int<1>+string user,
    int<1>+string password, int<2> port, int<4> replication_rank (0), int<4> master_id``.
    binlake reports no user or password (the server shows them in SHOW SLAVE HOSTS).
    """
    return (
        bytes([COM_REGISTER_SLAVE])
        + _u(4, server_id, "server_id")
        + _lenenc_short(report_host.encode(), "report_host")
        + _lenenc_short(report_user.encode(), "report_user")
        + _lenenc_short(report_password.encode(), "report_password")
        + _u(2, report_port, "report_port")
        + _u(4, 0, "replication_rank")
        + _u(4, master_id, "master_id")
    )


def encode_binlog_dump(server_id: int, file: str, position: int, flags: int = 0) -> bytes:
    """COM_BINLOG_DUMP payload: ``int<1> 0x12, int<4> position, int<2> flags, int<4> server_id,
    string<EOF> file name`` (no terminating NUL: the name runs to the end of the packet).

    MariaDB's GTID mode sends an empty file name (the start comes from ``@slave_connect_state``):
    the payload is then exactly 11 bytes.
    """
    return (
        bytes([COM_BINLOG_DUMP])
        + _u(4, position, "position")
        + _u(2, flags, "flags")
        + _u(4, server_id, "server_id")
        + file.encode()
    )


def encode_binlog_dump_gtid(
    server_id: int,
    gtid_set: bytes,
    *,
    file: str = "",
    position: int = 4,
    flags: int = BINLOG_THROUGH_GTID,
) -> bytes:
    """MySQL COM_BINLOG_DUMP_GTID payload: ``int<1> 0x1e, int<2> flags, int<4> server_id,
    int<4> file_name_len, string file_name, int<8> position, int<4> gtid_data_len, gtid_data``.

    ``gtid_set`` is the encoded set (``encode_mysql_gtid_set``) of transactions we already have;
    the data fields are sent when ``flags`` has BINLOG_THROUGH_GTID.
    """
    name = file.encode()
    out = (
        bytes([COM_BINLOG_DUMP_GTID])
        + _u(2, flags, "flags")
        + _u(4, server_id, "server_id")
        + _u(4, len(name), "file_name_len")
        + name
        + _u(8, position, "position")
    )
    if flags & BINLOG_THROUGH_GTID:
        out += _u(4, len(gtid_set), "gtid_data_len") + gtid_set
    return out


# ---- MySQL GTID sets -----------------------------------------------------------------------


def encode_mysql_gtid_set(text: str) -> bytes:
    """The binary GTID set COM_BINLOG_DUMP_GTID carries (MySQL's ``Gtid_set::encode``).

    ``int<8> n_sids``, then per UUID: ``16 bytes uuid``, ``int<8> n_intervals``, then per
    interval ``int<8> start, int<8> end`` with ``end`` exclusive. The empty set is 8 zero bytes.
    """
    try:
        sets = MysqlGtidSet.parse(text).sets()
    except ValueError as error:
        raise PacketEncodingError(str(error)) from None
    out = bytearray(_u(8, len(sets), "n_sids"))
    for sid, intervals in sets:
        out += sid.bytes + _u(8, len(intervals), "n_intervals")
        for start, end in intervals:
            out += _u(8, start, "interval start") + _u(8, end, "interval end")
    return bytes(out)


# ---- MariaDB GTID positions and the session variables --------------------------------------

_MARIA_GTID_LIST = re.compile(r"^(\d+-\d+-\d+)(,\d+-\d+-\d+)*$")


def normalize_mariadb_gtid_state(text: str) -> str:
    """``d-s-n,...`` without spaces; at most one GTID per domain; "" (from the start) allowed."""
    compact = "".join(text.split())
    if compact and _MARIA_GTID_LIST.match(compact) is None:
        raise PacketEncodingError(f"not a MariaDB GTID position (d-s-n,...): {text!r}")
    domains = [gtid.split("-", 1)[0] for gtid in filter(None, compact.split(","))]
    if len(set(domains)) != len(domains):
        raise PacketEncodingError(f"a MariaDB GTID position has one GTID per domain: {text!r}")
    for gtid in filter(None, compact.split(",")):
        domain, server, seq = (int(x) for x in gtid.split("-"))
        if domain > _U32_MAX or server > _U32_MAX or seq > _U64_MAX:
            raise PacketEncodingError(f"GTID {gtid} is out of range")
    return compact


def _sql_string(value: str) -> str:
    """A SQL string literal for values this module has validated (no quotes or backslashes)."""
    if "'" in value or "\\" in value:
        raise PacketEncodingError(f"refusing to quote {value!r}")
    return f"'{value}'"


def heartbeat_period_ns(period_s: float) -> int:
    """``@master_heartbeat_period`` is in nanoseconds."""
    if period_s <= 0:
        raise PacketEncodingError(f"heartbeat period must be positive, got {period_s}")
    return round(period_s * 1_000_000_000)


def mariadb_session_statements(
    checksum: str, heartbeat_period_s: float, gtid_state: str | None
) -> list[str]:
    """The SET statements MariaDB needs before COM_REGISTER_SLAVE / COM_BINLOG_DUMP.

    ``checksum`` is the server's ``@@binlog_checksum`` (we declare we understand it: the server
    then sends events with their checksums as written). GTID mode (``gtid_state`` not None) adds
    the connect state and strict mode, and is followed by a dump with an empty file name.
    """
    statements = [
        f"SET @master_binlog_checksum = {_sql_string(checksum)}",
        f"SET @master_heartbeat_period = {heartbeat_period_ns(heartbeat_period_s)}",
        f"SET @mariadb_slave_capability = {MARIADB_SLAVE_CAPABILITY_GTID}",
    ]
    if gtid_state is not None:
        state = normalize_mariadb_gtid_state(gtid_state)
        statements += [
            f"SET @slave_connect_state = {_sql_string(state)}",
            "SET @slave_gtid_strict_mode = 1",
            "SET @slave_gtid_ignore_duplicates = 0",
        ]
    return statements


def mysql_session_statements(checksum: str, heartbeat_period_s: float) -> list[str]:
    """The SET statements MySQL needs before its dump: 8.0.26+ reads the ``source_`` names,
    older versions the ``master_`` ones (user variables: setting both is harmless)."""
    ns = heartbeat_period_ns(heartbeat_period_s)
    value = _sql_string(checksum)
    return [
        f"SET @master_binlog_checksum = {value}",
        f"SET @source_binlog_checksum = {value}",
        f"SET @master_heartbeat_period = {ns}",
        f"SET @source_heartbeat_period = {ns}",
    ]


# ---- server replies ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ErrPacket:
    code: int
    sql_state: str | None
    message: str


def decode_err_packet(payload: bytes | memoryview) -> ErrPacket:
    """``0xFF, int<2> code, ['#' + 5-byte SQL state], message`` (protocol 4.1)."""
    raw = bytes(payload)
    if len(raw) < 3 or raw[0] != ERR_HEADER:
        raise PacketEncodingError(f"not an error packet: {raw[:16].hex()}")
    code = struct.unpack_from("<H", raw, 1)[0]
    rest = raw[3:]
    state = None
    if rest[:1] == b"#" and len(rest) >= 6:
        state, rest = rest[1:6].decode("ascii", "replace"), rest[6:]
    return ErrPacket(code, state, rest.decode("utf-8", "replace"))


def is_eof_packet(payload: bytes | memoryview) -> bool:
    return len(payload) > 0 and payload[0] == EOF_HEADER and len(payload) < EOF_MAX_PAYLOAD
