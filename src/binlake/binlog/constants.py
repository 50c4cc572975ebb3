"""Numbers of the binlog v4 format: event type codes, header flags, column types.

Names of event types are the ones MariaDB's ``SHOW BINLOG EVENTS`` and ``mariadb-binlog`` print,
so that our dumps can be compared with theirs.
"""

from __future__ import annotations

from enum import IntEnum, IntFlag

MAGIC = b"\xfebin"
HEADER_LEN = 19
CHECKSUM_LEN = 4
#: No event can be shorter than a header; larger than 1 GiB is impossible (max_allowed_packet).
MAX_EVENT_SIZE = 1 << 30
#: Offset of the flags field inside the common header.
FLAGS_OFFSET = 17
#: Absolute file offset of the FORMAT_DESCRIPTION event's flags (the IN_USE byte).
IN_USE_FLAG_FILE_OFFSET = len(MAGIC) + FLAGS_OFFSET


class EventType(IntEnum):
    UNKNOWN = 0
    START_V3 = 1
    QUERY = 2
    STOP = 3
    ROTATE = 4
    INTVAR = 5
    LOAD = 6
    SLAVE = 7
    CREATE_FILE = 8
    APPEND_BLOCK = 9
    EXEC_LOAD = 10
    DELETE_FILE = 11
    NEW_LOAD = 12
    RAND = 13
    USER_VAR = 14
    FORMAT_DESCRIPTION = 15
    XID = 16
    BEGIN_LOAD_QUERY = 17
    EXECUTE_LOAD_QUERY = 18
    TABLE_MAP = 19
    PRE_GA_WRITE_ROWS = 20
    PRE_GA_UPDATE_ROWS = 21
    PRE_GA_DELETE_ROWS = 22
    WRITE_ROWS_V1 = 23
    UPDATE_ROWS_V1 = 24
    DELETE_ROWS_V1 = 25
    INCIDENT = 26
    HEARTBEAT = 27
    IGNORABLE = 28
    ROWS_QUERY = 29
    WRITE_ROWS_V2 = 30
    UPDATE_ROWS_V2 = 31
    DELETE_ROWS_V2 = 32
    MYSQL_GTID = 33
    ANONYMOUS_GTID = 34
    PREVIOUS_GTIDS = 35
    TRANSACTION_CONTEXT = 36
    VIEW_CHANGE = 37
    XA_PREPARE = 38
    PARTIAL_UPDATE_ROWS = 39
    TRANSACTION_PAYLOAD = 40
    HEARTBEAT_V2 = 41
    # MariaDB's own range
    ANNOTATE_ROWS = 160
    BINLOG_CHECKPOINT = 161
    MARIADB_GTID = 162
    GTID_LIST = 163
    START_ENCRYPTION = 164
    QUERY_COMPRESSED = 165
    WRITE_ROWS_COMPRESSED_V1 = 166
    UPDATE_ROWS_COMPRESSED_V1 = 167
    DELETE_ROWS_COMPRESSED_V1 = 168
    WRITE_ROWS_COMPRESSED = 169
    UPDATE_ROWS_COMPRESSED = 170
    DELETE_ROWS_COMPRESSED = 171


#: Rows events with the version 1 post-header (8 bytes), compressed or not.
ROWS_V1_TYPES = frozenset(
    {
        EventType.WRITE_ROWS_V1,
        EventType.UPDATE_ROWS_V1,
        EventType.DELETE_ROWS_V1,
        EventType.WRITE_ROWS_COMPRESSED_V1,
        EventType.UPDATE_ROWS_COMPRESSED_V1,
        EventType.DELETE_ROWS_COMPRESSED_V1,
    }
)
#: Rows events with the version 2 post-header (10 bytes), compressed or not.
ROWS_V2_TYPES = frozenset(
    {
        EventType.WRITE_ROWS_V2,
        EventType.UPDATE_ROWS_V2,
        EventType.DELETE_ROWS_V2,
        EventType.WRITE_ROWS_COMPRESSED,
        EventType.UPDATE_ROWS_COMPRESSED,
        EventType.DELETE_ROWS_COMPRESSED,
    }
)
#: Every rows event binlake frames as a ``RowsEvent``.
ROWS_TYPES = ROWS_V1_TYPES | ROWS_V2_TYPES
#: MariaDB's compressed rows events (``log_bin_compress``).
COMPRESSED_ROWS_TYPES = frozenset(
    range(EventType.WRITE_ROWS_COMPRESSED_V1, EventType.DELETE_ROWS_COMPRESSED + 1)
)
#: Events that only ever occur inside a transaction or statement group.
IN_GROUP_TYPES = ROWS_TYPES | frozenset(
    {
        EventType.QUERY,
        EventType.QUERY_COMPRESSED,
        EventType.TABLE_MAP,
        EventType.ANNOTATE_ROWS,
        EventType.ROWS_QUERY,
        EventType.XID,
        EventType.XA_PREPARE,
        EventType.INTVAR,
        EventType.RAND,
        EventType.USER_VAR,
        EventType.PARTIAL_UPDATE_ROWS,
        # binlake's source facts (binlog/source_facts.py): only ever inside a group
        EventType.IGNORABLE,
    }
)
#: Heartbeats: what a source sends on an idle dump; never part of a binlog file.
HEARTBEAT_TYPES = frozenset({EventType.HEARTBEAT, EventType.HEARTBEAT_V2})

EVENT_TYPE_NAMES: dict[int, str] = {
    EventType.START_V3: "Start_v3",
    EventType.QUERY: "Query",
    EventType.STOP: "Stop",
    EventType.ROTATE: "Rotate",
    EventType.INTVAR: "Intvar",
    EventType.LOAD: "Load",
    EventType.SLAVE: "Slave",
    EventType.CREATE_FILE: "Create_file",
    EventType.APPEND_BLOCK: "Append_block",
    EventType.EXEC_LOAD: "Exec_load",
    EventType.DELETE_FILE: "Delete_file",
    EventType.NEW_LOAD: "New_load",
    EventType.RAND: "RAND",
    EventType.USER_VAR: "User var",
    EventType.FORMAT_DESCRIPTION: "Format_desc",
    EventType.XID: "Xid",
    EventType.BEGIN_LOAD_QUERY: "Begin_load_query",
    EventType.EXECUTE_LOAD_QUERY: "Execute_load_query",
    EventType.TABLE_MAP: "Table_map",
    EventType.PRE_GA_WRITE_ROWS: "Write_rows_event_old",
    EventType.PRE_GA_UPDATE_ROWS: "Update_rows_event_old",
    EventType.PRE_GA_DELETE_ROWS: "Delete_rows_event_old",
    EventType.WRITE_ROWS_V1: "Write_rows_v1",
    EventType.UPDATE_ROWS_V1: "Update_rows_v1",
    EventType.DELETE_ROWS_V1: "Delete_rows_v1",
    EventType.INCIDENT: "Incident",
    EventType.HEARTBEAT: "Heartbeat",
    EventType.IGNORABLE: "Ignorable",
    EventType.ROWS_QUERY: "Rows_query",
    EventType.WRITE_ROWS_V2: "Write_rows",
    EventType.UPDATE_ROWS_V2: "Update_rows",
    EventType.DELETE_ROWS_V2: "Delete_rows",
    EventType.MYSQL_GTID: "Gtid",
    EventType.ANONYMOUS_GTID: "Anonymous_Gtid",
    EventType.PREVIOUS_GTIDS: "Previous_gtids",
    EventType.TRANSACTION_CONTEXT: "Transaction_context",
    EventType.VIEW_CHANGE: "View_change",
    EventType.XA_PREPARE: "XA_prepare",
    EventType.PARTIAL_UPDATE_ROWS: "Update_rows_partial",
    EventType.TRANSACTION_PAYLOAD: "Transaction_payload",
    EventType.HEARTBEAT_V2: "Heartbeat_v2",
    EventType.ANNOTATE_ROWS: "Annotate_rows",
    EventType.BINLOG_CHECKPOINT: "Binlog_checkpoint",
    EventType.MARIADB_GTID: "Gtid",
    EventType.GTID_LIST: "Gtid_list",
    EventType.START_ENCRYPTION: "Start_encryption",
    EventType.QUERY_COMPRESSED: "Query_compressed",
    EventType.WRITE_ROWS_COMPRESSED_V1: "Write_rows_compressed_v1",
    EventType.UPDATE_ROWS_COMPRESSED_V1: "Update_rows_compressed_v1",
    EventType.DELETE_ROWS_COMPRESSED_V1: "Delete_rows_compressed_v1",
    EventType.WRITE_ROWS_COMPRESSED: "Write_rows_compressed",
    EventType.UPDATE_ROWS_COMPRESSED: "Update_rows_compressed",
    EventType.DELETE_ROWS_COMPRESSED: "Delete_rows_compressed",
}


def event_type_name(type_code: int) -> str:
    """The name MariaDB prints for an event type; ``Unknown(N)`` for codes it does not know."""
    return EVENT_TYPE_NAMES.get(type_code, f"Unknown({type_code})")


class EventFlag(IntFlag):
    BINLOG_IN_USE = 0x0001
    THREAD_SPECIFIC = 0x0004
    SUPPRESS_USE = 0x0008
    ARTIFICIAL = 0x0020
    RELAY_LOG = 0x0040
    IGNORABLE = 0x0080
    SKIP_REPLICATION = 0x8000


class ChecksumAlg(IntEnum):
    OFF = 0
    CRC32 = 1
    UNDEFINED = 255


class ColumnType(IntEnum):
    """``enum_field_types``: the column type codes in TABLE_MAP events."""

    DECIMAL = 0
    TINY = 1
    SHORT = 2
    LONG = 3
    FLOAT = 4
    DOUBLE = 5
    NULL = 6
    TIMESTAMP = 7
    LONGLONG = 8
    INT24 = 9
    DATE = 10
    TIME = 11
    DATETIME = 12
    YEAR = 13
    NEWDATE = 14
    VARCHAR = 15
    BIT = 16
    TIMESTAMP2 = 17
    DATETIME2 = 18
    TIME2 = 19
    TYPED_ARRAY = 20
    VECTOR = 242
    JSON = 245
    NEWDECIMAL = 246
    ENUM = 247
    SET = 248
    TINY_BLOB = 249
    MEDIUM_BLOB = 250
    LONG_BLOB = 251
    BLOB = 252
    VAR_STRING = 253
    STRING = 254
    GEOMETRY = 255
