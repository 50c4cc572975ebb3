"""Status variables of QUERY events (MySQL's and MariaDB's codes).

The raw block is kept verbatim, so re-encoding is exact; the known variables are decoded for
display and for the applier (session charset, SQL mode, time zone, XID of DDL ...). Lengths of
unknown codes are not knowable, so decoding stops at the first unknown code and says where.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Value = int | str | bytes | tuple[int, ...] | tuple[str, ...]


@dataclass(frozen=True, slots=True)
class QueryStatus:
    raw: bytes
    values: tuple[tuple[str, Value], ...]
    #: Offset in ``raw`` of the first code binlake does not know, or None if all were decoded.
    unknown_at: int | None = None

    def get(self, name: str) -> Value | None:
        for key, value in self.values:
            if key == name:
                return value
        return None


def _fixed(n: int) -> Callable[[bytes, int], tuple[Value, int]]:
    return lambda raw, p: (int.from_bytes(raw[p : p + n], "little"), p + n)


def _ints(*sizes: int) -> Callable[[bytes, int], tuple[Value, int]]:
    def read(raw: bytes, p: int) -> tuple[Value, int]:
        out = []
        for n in sizes:
            out.append(int.from_bytes(raw[p : p + n], "little"))
            p += n
        return tuple(out), p

    return read


def _lenstr(raw: bytes, p: int) -> tuple[Value, int]:
    n = raw[p]
    return raw[p + 1 : p + 1 + n].decode("utf-8", "replace"), p + 1 + n


def _catalog(raw: bytes, p: int) -> tuple[Value, int]:
    value, end = _lenstr(raw, p)
    return value, end + 1  # old catalog code ends with a NUL


def _invoker(raw: bytes, p: int) -> tuple[Value, int]:
    user, p = _lenstr(raw, p)
    host, p = _lenstr(raw, p)
    return (str(user), str(host)), p


def _updated_dbs(raw: bytes, p: int) -> tuple[Value, int]:
    count, p = raw[p], p + 1
    if count == 254:  # more databases than the event lists
        return (), p
    names = []
    for _ in range(count):
        end = raw.index(b"\0", p)
        names.append(raw[p:end].decode("utf-8", "replace"))
        p = end + 1
    return tuple(names), p


def _commit_ts(raw: bytes, p: int) -> tuple[Value, int]:
    return raw[p : p + 8], p + 8


_CODES: dict[int, tuple[str, Callable[[bytes, int], tuple[Value, int]]]] = {
    0: ("flags2", _fixed(4)),
    1: ("sql_mode", _fixed(8)),
    2: ("catalog", _catalog),
    3: ("auto_increment", _ints(2, 2)),
    4: ("charset", _ints(2, 2, 2)),
    5: ("time_zone", _lenstr),
    6: ("catalog", _lenstr),
    7: ("lc_time_names", _fixed(2)),
    8: ("charset_database", _fixed(2)),
    9: ("table_map_for_update", _fixed(8)),
    10: ("master_data_written", _fixed(4)),
    11: ("invoker", _invoker),
    12: ("updated_db_names", _updated_dbs),
    13: ("microseconds", _fixed(3)),
    14: ("commit_ts", _commit_ts),
    15: ("commit_ts2", _commit_ts),
    16: ("explicit_defaults_for_timestamp", _fixed(1)),
    17: ("ddl_logged_with_xid", _fixed(8)),
    18: ("default_collation_for_utf8mb4", _fixed(2)),
    19: ("sql_require_primary_key", _fixed(1)),
    20: ("default_table_encryption", _fixed(1)),
    128: ("hrnow", _fixed(3)),
    129: ("xid", _fixed(8)),
    130: ("gtid_flags3", _fixed(1)),
}


def decode_query_status(raw: bytes) -> QueryStatus:
    values: list[tuple[str, Value]] = []
    p = 0
    while p < len(raw):
        entry = _CODES.get(raw[p])
        if entry is None:
            return QueryStatus(raw, tuple(values), p)
        name, read = entry
        try:
            value, end = read(raw, p + 1)
        except (IndexError, ValueError):
            return QueryStatus(raw, tuple(values), p)
        if end > len(raw):
            return QueryStatus(raw, tuple(values), p)
        values.append((name, value))
        p = end
    return QueryStatus(raw, tuple(values), None)


def encode_query_status(status: QueryStatus) -> bytes:
    return status.raw
