"""binlake's CRC32 (zlib-ng's, computed in pieces that keep the GIL) is zlib's CRC32."""

from __future__ import annotations

import zlib

from hypothesis import given
from hypothesis import strategies as st

from binlake.binlog.header import CRC_PIECE, crc32

SIZES = st.integers(min_value=0, max_value=4 * CRC_PIECE + 3)


@given(data=st.binary(max_size=4 * CRC_PIECE + 3), start=st.integers(0, 0xFFFFFFFF))
def test_crc32_of_any_bytes_from_any_start_value_is_zlibs(data: bytes, start: int) -> None:
    assert crc32(data, start) == zlib.crc32(data, start)
    assert crc32(memoryview(data), start) == zlib.crc32(data, start)


@given(size=SIZES, cut=st.integers(min_value=0))
def test_crc32_continued_over_two_parts_is_the_crc32_of_the_whole(size: int, cut: int) -> None:
    data = bytes(range(256)) * (size // 256 + 1)
    data = data[:size]
    at = cut % (size + 1)
    assert crc32(data[at:], crc32(data[:at])) == zlib.crc32(data)
