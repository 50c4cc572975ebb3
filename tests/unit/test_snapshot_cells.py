"""A chunk's result rows located and decoded column by column (hand-made row packets): the
length encodings, NULLs, malformed packets, and values that must be refused, never replaced.
Exactness for every mapped type against a real MariaDB: tests/integration/test_replicate.py
(the type coverage workload, copied again by a snapshot)."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

from binlake.errors import SourceProtocolError, ValueDecodeError
from binlake.snapshot.cells import as_binary_view, locate
from binlake.snapshot.columns import CopyColumn
from binlake.snapshot.decode import decoder
from binlake.snapshot.result_set import PADDING, RowBlock
from binlake.typemap import IcebergType

pytestmark = pytest.mark.unit


def _block(*rows: bytes) -> RowBlock:
    data = b"".join(rows) + bytes(PADDING)
    starts, pos = [], 0
    for row in rows:
        starts.append(pos)
        pos += len(row)
    ends = [s + len(r) for s, r in zip(starts, rows, strict=True)]
    return RowBlock(np.frombuffer(data, np.uint8), np.array(starts), np.array(ends))


def _cell(text: bytes) -> bytes:
    return bytes([len(text)]) + text


def test_length_encodings_and_a_null_last_cell_are_located() -> None:
    long, huge = b"x" * 300, b"y" * 70000
    block = _block(
        b"\x01a" + b"\xfc" + len(long).to_bytes(2, "little") + long + b"\xfb",
        b"\x00" + b"\xfd" + len(huge).to_bytes(3, "little") + huge + b"\x02zz",
    )
    first, second, third = locate(block, 3)
    assert as_binary_view(first).to_pylist() == [b"a", b""]
    assert as_binary_view(second).to_pylist() == [long, huge]
    assert as_binary_view(third).to_pylist() == [None, b"zz"]


def test_cells_that_do_not_fill_their_packet_are_a_protocol_error() -> None:
    with pytest.raises(SourceProtocolError):
        locate(_block(b"\x01a\x01b\x01c"), 2)


def test_invalid_utf8_is_a_decode_error_never_replaced() -> None:
    spec = CopyColumn("v", "varchar", IcebergType.STRING, charset="utf8mb4")
    cells = locate(_block(b"\x02\xc3\xa9", b"\x01\xff"), 1)[0]
    with pytest.raises(ValueDecodeError):
        decoder(spec)(cells, Counter())


def test_a_malformed_datetime_is_a_decode_error() -> None:
    spec = CopyColumn("v", "datetime", IcebergType.TIMESTAMP)
    cells = locate(_block(_cell(b"2024-01-01 00:00:00"), _cell(b"2024-01-01T00:00:00")), 1)[0]
    with pytest.raises(ValueDecodeError):
        decoder(spec)(cells, Counter())


def test_zero_dates_become_null_and_are_counted_per_column() -> None:
    spec = CopyColumn("at", "datetime", IcebergType.TIMESTAMP, fsp=6)
    rows = [b"2024-02-29 23:59:59.000001", b"0000-00-00 00:00:00.000000", b"\xfb"]
    cells = locate(_block(*(r if r == b"\xfb" else _cell(r) for r in rows)), 1)[0]
    zero: Counter[str] = Counter()
    values = decoder(spec)(cells, zero).to_pylist()
    assert values == [dt.datetime(2024, 2, 29, 23, 59, 59, 1), None, None]
    assert zero == Counter({"at": 1})


def test_decimals_and_unsigned_bigints_decode_exactly() -> None:
    money = CopyColumn("n", "decimal", IcebergType.DECIMAL, precision=12, scale=2)
    cells = locate(_block(_cell(b"-9999999999.99"), _cell(b"0.05")), 1)[0]
    assert decoder(money)(cells, Counter()).to_pylist() == [
        Decimal("-9999999999.99"),
        Decimal("0.05"),
    ]
    big = CopyColumn("u", "bigint", IcebergType.DECIMAL, precision=20, scale=0)
    cells = locate(_block(_cell(b"18446744073709551615")), 1)[0]
    array = decoder(big)(cells, Counter())
    assert array.type == pa.decimal128(20, 0)
    assert array.to_pylist() == [Decimal(18446744073709551615)]
