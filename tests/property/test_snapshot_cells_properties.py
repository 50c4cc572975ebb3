"""A snapshot chunk's C loops (``_textcells.c``) against their pure-Python references: the
packet framing of a receive buffer (``result_set.frame_packets``) and the Arrow binary views
of located cells (``cells.binary_views``), on random rows of random cells, NULLs, every length
encoding, values up to and past the 12 inline bytes, and buffers cut anywhere; and DATE /
DATETIME text parsed in C (``_textcells.temporal``) against numpy (``decode.temporal_values``):
zero, invalid and leap dates, every fraction width, malformed cells."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from binlake.errors import ValueDecodeError
from binlake.snapshot.cells import as_binary_view, binary_views, locate
from binlake.snapshot.columns import CopyColumn
from binlake.snapshot.decode import temporal_values
from binlake.snapshot.result_set import NATIVE, PADDING, RowBlock, frame_packets
from binlake.typemap import IcebergType

pytestmark = pytest.mark.property

needs_native = pytest.mark.skipif(
    NATIVE is None,
    reason="the C snapshot loops are not loaded (pure Python: BINLAKE_PURE_PYTHON=1 or no "
    "current build); this run tests the Python loops they fall back to",
)

cell = st.none() | st.binary(max_size=40) | st.binary(min_size=250, max_size=300)
rows = st.lists(st.lists(cell, min_size=3, max_size=3), min_size=1, max_size=30)


def encoded(value: bytes | None) -> bytes:
    """A text-protocol cell: NULL, or a length-encoded string (1, 3 or 4 length bytes)."""
    if value is None:
        return b"\xfb"
    if len(value) < 0xFB:
        return bytes([len(value)]) + value
    if len(value) < 1 << 16:
        return b"\xfc" + len(value).to_bytes(2, "little") + value
    return b"\xfd" + len(value).to_bytes(3, "little") + value


def packets(payloads: list[bytes]) -> bytes:
    return b"".join(
        len(p).to_bytes(3, "little") + bytes([i & 0xFF]) + p for i, p in enumerate(payloads)
    )


def block(table: list[list[bytes | None]]) -> RowBlock:
    payloads = [b"".join(encoded(v) for v in row) for row in table]
    data = b"".join(payloads) + bytes(PADDING)
    starts = np.cumsum([0] + [len(p) for p in payloads[:-1]]).astype(np.int64)
    ends = starts + np.array([len(p) for p in payloads], np.int64)
    return RowBlock(np.frombuffer(data, np.uint8), starts, ends)


@needs_native
@given(rows, st.integers(0, 8), st.integers(0, 20), st.data())
def test_the_c_framing_finds_the_packets_the_python_one_finds(
    table: list[list[bytes | None]], lead: int, tail: int, data: st.DataObject
) -> None:
    """Whole packets from any start, a buffer cut anywhere (a partial header or payload last),
    stale bytes after the end."""
    assert NATIVE is not None
    wire = bytes(lead) + packets([b"".join(encoded(v) for v in row) for row in table])
    buffer = bytearray(wire + bytes(range(tail)))
    end = data.draw(st.integers(lead, len(wire)))
    raw, pos = NATIVE.frame(buffer, lead, end)
    bodies, expected = frame_packets(buffer, lead, end)
    assert np.frombuffer(raw, np.int64).tolist() == bodies and pos == expected


@needs_native
@given(rows)
def test_the_c_views_are_the_python_views(table: list[list[bytes | None]]) -> None:
    assert NATIVE is not None
    for cells in locate(block(table), 3):
        views = NATIVE.views(cells.data, cells.starts, cells.lengths)
        assert views == binary_views(cells).tobytes()


@given(rows)
def test_binary_views_give_back_every_cell(table: list[list[bytes | None]]) -> None:
    """Whichever loop runs: the Arrow array holds each cell's bytes, NULLs as nulls."""
    for index, cells in enumerate(locate(block(table), 3)):
        assert as_binary_view(cells).to_pylist() == [row[index] for row in table]
        assert as_binary_view(cells).type == pa.binary_view()


@needs_native
def test_the_c_views_refuse_a_cell_outside_its_block() -> None:
    assert NATIVE is not None
    data = np.zeros(16, np.uint8)
    with pytest.raises(ValueError):
        NATIVE.views(data, np.array([10], np.int64), np.array([13], np.int64))
    with pytest.raises(ValueError):
        NATIVE.views(data, np.array([-1], np.int64), np.array([1], np.int64))


# ---- DATE, DATETIME, TIMESTAMP: C against numpy ------------------------------------------

WIDTHS = [10, 19, 21, 22, 23, 24, 25, 26]
year = st.integers(0, 9999) | st.sampled_from([0, 1, 1600, 1900, 1970, 2000, 2024, 2100, 9999])
month = st.integers(0, 13)
day = st.integers(0, 32)


@st.composite
def temporal_text(draw: st.DrawFn, width: int) -> bytes:
    """A cell of ``width`` bytes: mostly well formed (zero and invalid dates among them),
    sometimes a wrong digit, separator or length."""
    text = f"{draw(year):04d}-{draw(month):02d}-{draw(day):02d}"
    if width > 10:
        text += f" {draw(st.integers(0, 99)):02d}:{draw(st.integers(0, 99)):02d}"
        text += f":{draw(st.integers(0, 99)):02d}"
    if width > 19:
        text += "." + "".join(
            draw(st.lists(st.sampled_from("0123456789"), min_size=width - 20, max_size=width - 20))
        )
    raw = bytearray(text.encode())
    damage = draw(st.integers(0, 40))
    if damage == 0:
        raw[draw(st.integers(0, len(raw) - 1))] = draw(st.sampled_from(b"/x :.-9"))
    elif damage == 1:
        raw = raw[:-1] if draw(st.booleans()) else raw + b"0"
    return bytes(raw)


@needs_native
@given(st.sampled_from(WIDTHS), st.data())
def test_the_c_temporal_parse_is_the_numpy_one(width: int, data: st.DataObject) -> None:
    """Same days or microseconds and the same invalid dates; a malformed cell leaves the
    column to numpy (None), which raises its typed error."""
    assert NATIVE is not None
    cells = data.draw(st.lists(st.none() | temporal_text(width), min_size=1, max_size=20))
    located = locate(block([[c] for c in cells]), 1)[0]
    spec = CopyColumn(
        "at", "date" if width == 10 else "datetime", IcebergType.TIMESTAMP, fsp=max(0, width - 20)
    )
    found = NATIVE.temporal(located.data, located.starts, located.lengths, located.nulls, width)
    try:
        values, valid = temporal_values(located, spec, width)
    except ValueDecodeError:
        assert found is None
        return
    assert found is not None
    live = ~located.nulls
    c_values, c_invalid = np.frombuffer(found[0], np.int64), np.frombuffer(found[1], np.bool_)
    assert (c_invalid[live] == ~valid[live]).all() and not c_invalid[~live].any()
    good = live & valid
    assert (c_values[good] == values[good]).all() and not c_values[~good].any()
