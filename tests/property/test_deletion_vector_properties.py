"""Deletion vectors (``binlake.lake.write.deletion_vectors``): any set of positions comes back
from its blob as it was, a union is the set union, and any one byte changed is caught."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from binlake.errors import DeletionVectorError
from binlake.lake.write.deletion_vectors import Positions, decode_vector, encode_vector

#: Positions clustered in a few buckets and containers (runs, arrays, bitmaps all occur).
HIGH = st.sampled_from([0, 1, 7, 0x7FFFFFFE])
LOW = st.one_of(st.integers(0, 70_000), st.integers(0, 0xFFFFFFFF))
POSITION = st.builds(lambda high, low: (high << 32) | low, HIGH, LOW)
RUN = st.builds(
    lambda start, size: range(start, start + size), st.integers(0, 1 << 20), st.integers(1, 5000)
)
POSITIONS = st.builds(
    lambda singles, runs: {*singles, *(p for run in runs for p in run)},
    st.sets(POSITION, max_size=300),
    st.lists(RUN, max_size=3),
)


@given(positions=POSITIONS)
def test_any_positions_come_back_from_their_blob(positions: set[int]) -> None:
    back = decode_vector(encode_vector(Positions(positions)), "p")
    assert list(back) == sorted(positions)


@given(old=POSITIONS, new=POSITIONS)
def test_a_merge_is_the_union(old: set[int], new: set[int]) -> None:
    merged = Positions(old)
    merged.union(Positions(new))
    assert list(decode_vector(encode_vector(merged), "p")) == sorted(old | new)


@given(positions=POSITIONS, at=st.integers(min_value=0), bit=st.integers(0, 7))
def test_any_one_bit_changed_is_caught(positions: set[int], at: int, bit: int) -> None:
    blob = bytearray(encode_vector(Positions(positions)))
    blob[at % len(blob)] ^= 1 << bit
    with pytest.raises(DeletionVectorError):
        decode_vector(bytes(blob), "p")
