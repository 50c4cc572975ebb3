"""Deletion vectors and their Puffin files (``binlake.lake.write.deletion_vectors``): the bytes
the spec describes, round trips, and every kind of damage found when read."""

from __future__ import annotations

import json
import random
import struct
import zlib

import pytest

from binlake.errors import DeletionVectorError
from binlake.lake.write.deletion_vectors import (
    DV_MAGIC,
    PUFFIN_MAGIC,
    Positions,
    decode_vector,
    encode_vector,
    puffin_blobs,
    puffin_file,
)


def spec_blob(positions: list[int]) -> bytes:
    """Positions in one bucket (key 0, fewer than 4,096), laid out by hand from the spec: the
    portable 32-bit Roaring form with array containers, then the DV framing around it."""
    by_high: dict[int, list[int]] = {}
    for pos in sorted(positions):
        by_high.setdefault(pos >> 16, []).append(pos & 0xFFFF)
    n = len(by_high)
    roaring = struct.pack("<II", 12346, n)
    for high, lows in by_high.items():
        roaring += struct.pack("<HH", high, len(lows) - 1)
    offset = 8 + 8 * n
    for lows in by_high.values():
        roaring += struct.pack("<I", offset)
        offset += 2 * len(lows)
    for lows in by_high.values():
        roaring += struct.pack(f"<{len(lows)}H", *lows)
    body = DV_MAGIC + struct.pack("<Q", 1) + struct.pack("<I", 0) + roaring
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))


def test_a_vector_is_the_bytes_the_spec_lays_out() -> None:
    positions = [1, 5, 70_000, 70_001]
    assert encode_vector(Positions(positions)) == spec_blob(positions)
    assert list(decode_vector(spec_blob(positions), "f")) == positions


@pytest.mark.parametrize(
    "positions",
    [
        [],
        [0],
        list(range(0, 200_000, 3)),  # bitmap containers (more than 4,096 in a 65,536 span)
        list(range(10, 90_000)),  # runs
        [(1 << 32) - 1, 1 << 32, (5 << 32) + 7, (0x7FFFFFFE << 32) + 9],  # 64-bit positions
        random.Random(36).sample(range(1 << 34), 20_000),
        # five containers (an offset header even with runs): runs, an array, a bitmap, a run
        [*range(131_072), *range(131_072, 132_072, 10), *range(196_608, 216_608, 2), 300_000],
    ],
    ids=["empty", "zero", "bitmaps", "runs", "wide", "random", "mixed"],
)
def test_a_vector_round_trips(positions: list[int]) -> None:
    blob = encode_vector(Positions(positions))
    back = decode_vector(blob, "f")
    assert list(back) == sorted(positions)
    assert len(back) == len(positions)


def test_merging_vectors_is_their_union() -> None:
    old = Positions([1, 2, 1 << 33])
    old.union(Positions([2, 3, (1 << 33) + 1]))
    assert list(old) == [1, 2, 3, 1 << 33, (1 << 33) + 1]


def flip(blob: bytes, at: int) -> bytes:
    return blob[:at] + bytes([blob[at] ^ 0x01]) + blob[at + 1 :]


def reframe(body: bytes) -> bytes:
    """A body framed with a right length and CRC (damage the CRC cannot see)."""
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))


BLOB = encode_vector(Positions(range(0, 50_000, 7)))
BODY = BLOB[4:-4]


@pytest.mark.parametrize(
    ("blob", "reason"),
    [
        (flip(BLOB, 30), "CRC-32"),
        (flip(BLOB, len(BLOB) - 1), "CRC-32"),
        (BLOB[:-1], "length field"),
        (BLOB[:10], "too short"),
        (reframe(b"\x00" + BODY[1:]), "magic"),
        (reframe(BODY[:4] + struct.pack("<Q", 2) + BODY[12:]), "buckets announced"),
        (reframe(BODY + b"\x00\x00"), "after the last bucket"),
        (reframe(BODY[:16] + b"\xff" * 4 + BODY[20:]), "not a whole Roaring bitmap"),
    ],
    ids=["crc-body", "crc-itself", "truncated", "stub", "magic", "count", "trailing", "cookie"],
)
def test_a_damaged_vector_is_a_typed_error_naming_the_file(blob: bytes, reason: str) -> None:
    with pytest.raises(DeletionVectorError) as caught:
        decode_vector(blob, "s3://w/t/data/d.puffin", "s3://w/t/data/a.parquet")
    error = caught.value
    assert reason in str(error.check)
    assert error.file == "s3://w/t/data/d.puffin"
    assert "s3://w/t/data/a.parquet" in str(error)
    assert error.hint and "restore" in error.hint


def test_a_puffin_file_lists_one_blob_per_data_file_with_the_dv_metadata() -> None:
    vectors = {"f/a.parquet": Positions([1, 2]), "f/b.parquet": Positions([1 << 32])}
    data, blobs = puffin_file(vectors, "binlake test")
    assert data[:4] == PUFFIN_MAGIC and data[-4:] == PUFFIN_MAGIC
    assert data[-8:-4] == b"\x00\x00\x00\x00", "no flag: the footer is not compressed"
    (size,) = struct.unpack_from("<I", data, len(data) - 12)
    footer = json.loads(data[len(data) - 12 - size : len(data) - 12])
    assert footer["properties"] == {"created-by": "binlake test"}
    first = footer["blobs"][0]
    assert first["type"] == "deletion-vector-v1" and first["fields"] == [2147483645]
    assert (first["snapshot-id"], first["sequence-number"]) == (-1, -1)
    assert first["properties"] == {"referenced-data-file": "f/a.parquet", "cardinality": "2"}
    assert "compression-codec" not in first
    assert puffin_blobs(data, "p") == blobs
    for blob, (path, positions) in zip(blobs, vectors.items(), strict=True):
        assert (blob.data_file, blob.cardinality) == (path, len(positions))
        read = decode_vector(data[blob.offset : blob.offset + blob.length], "p")
        assert list(read) == list(positions)


@pytest.mark.parametrize("cut", [("start", 0), ("end", -1), ("size", -12)])
def test_a_damaged_puffin_footer_is_a_typed_error(cut: tuple[str, int]) -> None:
    data, _ = puffin_file({"a": Positions([1])}, "binlake")
    with pytest.raises(DeletionVectorError, match=r"^p: the Puffin file is damaged: "):
        puffin_blobs(flip(data, cut[1] % len(data)), "p")


def test_a_position_outside_a_vectors_range_is_refused() -> None:
    with pytest.raises(ValueError, match="out of a deletion vector's range"):
        Positions([-1])
