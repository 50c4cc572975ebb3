"""Builds binlog files in memory for tests, with the framing MariaDB 10.11 uses.

The post-header lengths are those of a real MariaDB 10.11 FORMAT_DESCRIPTION; events are
encoded with binlake's own encoder, so ``end_log_pos`` and CRC32 are right by construction.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from binlake.binlog.codec import Payload, encode_event
from binlake.binlog.constants import MAGIC, ChecksumAlg, EventFlag
from binlake.binlog.events import (
    FL_DDL,
    FL_STANDALONE,
    GtidListEvent,
    MariaGtidEvent,
    QueryEvent,
    RotateEvent,
    XidEvent,
)
from binlake.binlog.format import Flavor, FormatContext
from binlake.binlog.query_status import QueryStatus
from binlake.binlog.rows import RowsFlag, make_rows_event
from binlake.binlog.tablemap import TableMap

MARIADB_POST_HEADER_LENGTHS = bytes.fromhex(
    "380d000800120004040404120000e400041a08000000080808020000000a0a0a"
    "0000000000000a0a0a" + "00" * 119 + "041304000d0808080a0a0a"
)

MARIADB_CTX = FormatContext(
    binlog_version=4,
    server_version="10.11.19-MariaDB-log",
    create_timestamp=0,
    header_length=19,
    post_header_lengths=tuple(MARIADB_POST_HEADER_LENGTHS),
    checksum_alg=ChecksumAlg.CRC32,
    flavor=Flavor.MARIADB,
)
NO_STATUS = QueryStatus(b"", ())


def query(text: str, database: str = "shop") -> QueryEvent:
    return QueryEvent(1, 0, 0, NO_STATUS, database, text.encode())


@dataclass
class LogBuilder:
    """Appends events to an in-memory binlog; ``offsets`` records where each event starts."""

    ctx: FormatContext = MARIADB_CTX
    server_id: int = 1
    buf: bytearray = field(default_factory=lambda: bytearray(MAGIC))
    offsets: list[int] = field(default_factory=list)
    seq_no: int = 0

    def add(self, payload: Payload, flags: int = 0) -> int:
        offset = len(self.buf)
        probe = encode_event(payload, self.ctx, server_id=self.server_id, flags=flags)
        event = encode_event(
            payload,
            self.ctx,
            timestamp=1_700_000_000,
            server_id=self.server_id,
            log_pos=offset + len(probe),
            flags=flags,
        )
        self.buf += event
        self.offsets.append(offset)
        return offset

    def header(self, in_use: bool = False) -> LogBuilder:
        self.add(self.ctx, flags=EventFlag.BINLOG_IN_USE if in_use else 0)
        self.add(GtidListEvent((), 0))
        return self

    def transaction(self, statements: int = 1, xid: int | None = None) -> tuple[int, int]:
        """A MariaDB-style transaction: GTID (opening it), statements, XID. Returns (start, end)."""
        self.seq_no += 1
        start = self.add(MariaGtidEvent(self.seq_no, 0, 0, None, None, b""))
        for i in range(statements):
            self.add(query(f"INSERT INTO t VALUES ({self.seq_no}, {i})"))
        self.add(XidEvent(xid if xid is not None else self.seq_no))
        return start, len(self.buf)

    def ddl(self, text: str = "CREATE TABLE t (id INT PRIMARY KEY)") -> tuple[int, int]:
        self.seq_no += 1
        flags = FL_STANDALONE | FL_DDL
        start = self.add(MariaGtidEvent(self.seq_no, 0, flags, None, None, b""))
        self.add(query(text))
        return start, len(self.buf)

    def write_rows(self, table: TableMap, count: int) -> None:
        """``count`` WRITE_ROWS events of one row each (0, 1, ...) on ``table``, the last one
        ending the statement."""
        for i in range(count):
            flags = RowsFlag.STMT_END if i == count - 1 else 0
            self.add(replace(make_rows_event("write", table, [(None, (i,))]), flags=flags))

    def rotate(self, next_file: str = "mariadb-bin.000002") -> int:
        return self.add(RotateEvent(4, next_file))

    def bytes(self) -> bytes:
        return bytes(self.buf)
