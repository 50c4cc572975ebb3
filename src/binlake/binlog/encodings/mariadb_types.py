"""MariaDB's UUID, INET4 and INET6 data types, as far as a binlog can show them.

MariaDB's UUID, INET4 and INET6 columns are indistinguishable from BINARY(16), BINARY(4) and
BINARY(16) in the binlog: MariaDB 10.11 logs them as type STRING (254) with real type STRING,
length 16/4/16 and the binary collation (63), even with ``binlog_row_metadata=FULL``; nothing in
the TABLE_MAP marks them. Their row-image bytes are the value in network order (a UUID's 16 bytes
in the order of its text form), with trailing zero bytes stripped like every BINARY(n). Decoding
therefore returns padded ``bytes``; a caller that knows the column's type from the source schema
(``information_schema.COLUMNS.DATA_TYPE``) passes a hint (``"uuid"``, ``"inet4"``, ``"inet6"``)
and gets MariaDB's canonical text instead (``format_uuid``, ``format_inet4``, ``format_inet6``).

Measured on MariaDB 10.11.19: ``CREATE TABLE t (u UUID, i4 INET4, i6 INET6, b BINARY(16))``
gives the TABLE_MAP types ``fe fe fe fe`` with metadata ``fe10 fe04 fe10 fe10`` and
COLUMN_CHARSET/DEFAULT_CHARSET collation 63 for all four; ``mariadb-binlog
--print-table-metadata`` prints them as ``BINARY(16)``, ``BINARY(4)``, ``BINARY(16)``,
``BINARY(16)``. ``'123e4567-e89b-12d3-a456-426655440000'`` is logged as ``0e 12 3e 45 67 e8 9b
12 d3 a4 56 42 66 55 44`` (length 14: the two trailing zero bytes stripped), including for
time-based (version 1) UUIDs, so the bytes are the text order, not an index-friendly swap.
"""

from __future__ import annotations

import ipaddress
import struct
import uuid

HINTS = frozenset({"uuid", "inet4", "inet6"})
#: The BINARY(n) length each hinted type occupies.
HINT_LENGTHS = {"uuid": 16, "inet4": 4, "inet6": 16}


def format_uuid(raw: bytes) -> str:
    """MariaDB's text of a UUID column value (16 bytes in text order)."""
    return str(uuid.UUID(bytes=bytes(raw)))


def format_inet4(raw: bytes) -> str:
    return str(ipaddress.IPv4Address(bytes(raw)))


def format_inet6(raw: bytes) -> str:
    """MariaDB's text of an INET6 value: RFC 5952 with ``::a.b.c.d`` for embedded IPv4."""
    words = struct.unpack(">8H", raw)
    best_start, best_len, start = -1, 0, -1
    for i, word in enumerate((*words, 1)):
        if word == 0 and start < 0:
            start = i
        elif word != 0 and start >= 0:
            if i - start > best_len:
                best_start, best_len = start, i - start
            start = -1
    if best_start == 0 and (best_len == 6 or (best_len == 5 and words[5] == 0xFFFF)):
        prefix = "::ffff:" if best_len == 5 else "::"
        return prefix + ".".join(str(b) for b in raw[12:])
    if best_len < 2:
        return ":".join(f"{w:x}" for w in words)
    head = ":".join(f"{w:x}" for w in words[:best_start])
    tail = ":".join(f"{w:x}" for w in words[best_start + best_len :])
    return f"{head}::{tail}"


def parse_hinted(hint: str, text: str) -> bytes:
    if hint == "uuid":
        return uuid.UUID(text).bytes
    if hint == "inet4":
        return ipaddress.IPv4Address(text).packed
    return ipaddress.IPv6Address(text).packed
