"""Deletion vectors (Iceberg format v3) and the Puffin files that hold them, pure code.

A deletion vector (DV) names the deleted rows of one data file by position. Its blob, of type
``deletion-vector-v1`` (Iceberg spec, "Deletion Vectors"; Puffin spec, "deletion-vector-v1"):

* the length of what follows up to the CRC (magic and vector), 4 bytes big-endian;
* the magic ``D1 D3 39 64``;
* the vector: Roaring's 64-bit "portable" form: the number of 32-bit buckets, 8 bytes
  little-endian, then per bucket (keys ascending) its key (the positions' high 32 bits), 4 bytes
  little-endian, and a 32-bit Roaring bitmap of the low 32 bits in Roaring's portable form
  (``pyroaring``'s ``serialize``);
* a CRC-32 of magic and vector, 4 bytes big-endian.

A Puffin file: the magic ``PFA1``, the blobs one after another, then the footer: the magic, a
JSON payload (``{"blobs": [{type, fields, snapshot-id, sequence-number, offset, length,
properties}], "properties": {created-by}}``), the payload's length (4 bytes little-endian), 4
bytes of flags (none set: the payload is not compressed) and the magic again. A DV's metadata
names the row-position field (``fields = [2147483645]``), inherits the commit's snapshot and
sequence number (-1) and carries ``referenced-data-file`` and ``cardinality``; the manifest's
``content_offset`` / ``content_size_in_bytes`` are the blob's offset and length.

Every blob written carries its CRC; every blob read here has its length, magic, buckets and
CRC checked (``decode_vector``), a failure is a ``DeletionVectorError`` naming the file.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from pyroaring import BitMap
from zlib_ng.zlib_ng import crc32

from binlake.errors import DeletionVectorError

PUFFIN_MAGIC = b"PFA1"
DV_MAGIC = bytes.fromhex("D1D33964")
DV_BLOB_TYPE = "deletion-vector-v1"
#: Iceberg's reserved field id of a row's position (``_pos``, ``MetadataColumns.ROW_POSITION``).
ROW_POSITION_FIELD_ID = 2147483645
FOOTER_FLAGS = 4
_LOW = 0xFFFFFFFF


class Positions:
    """A set of 64-bit row positions, as 32-bit Roaring bitmaps keyed by the high 32 bits."""

    def __init__(self, positions: Iterable[int] = ()) -> None:
        self.buckets: dict[int, BitMap] = {}
        self.add(positions)

    def add(self, positions: Iterable[int]) -> None:
        for pos in positions:
            if pos < 0 or pos >> 32 > 0x7FFFFFFE:
                raise ValueError(f"row position {pos} is out of a deletion vector's range")
            bucket = self.buckets.get(pos >> 32)
            if bucket is None:
                bucket = self.buckets[pos >> 32] = BitMap()
            bucket.add(pos & _LOW)

    def union(self, other: Positions) -> None:
        for key, bitmap in other.buckets.items():
            mine = self.buckets.get(key)
            self.buckets[key] = bitmap.copy() if mine is None else mine | bitmap

    def __len__(self) -> int:
        return sum(len(bitmap) for bitmap in self.buckets.values())

    def __iter__(self) -> Iterator[int]:
        for key in sorted(self.buckets):
            yield from ((key << 32) | low for low in self.buckets[key])


def encode_vector(positions: Positions) -> bytes:
    """The ``deletion-vector-v1`` blob of ``positions``."""
    keys = sorted(key for key, bitmap in positions.buckets.items() if bitmap)
    parts = [DV_MAGIC, struct.pack("<Q", len(keys))]
    for key in keys:
        bitmap = positions.buckets[key].copy()
        bitmap.run_optimize()
        parts += [struct.pack("<I", key), bitmap.serialize()]
    body = b"".join(parts)
    return struct.pack(">I", len(body)) + body + struct.pack(">I", crc32(body))


def decode_vector(
    blob: bytes, location: str, data_file: str | None = None, table: str | None = None
) -> Positions:
    """The positions of a ``deletion-vector-v1`` blob read from ``location`` (a DV of
    ``table``), every part checked (length, magic, buckets, CRC); a failure is a
    ``DeletionVectorError`` (its line names the file and the table, its message neither)."""

    def damaged(reason: str) -> DeletionVectorError:
        of = f" (deletes of {data_file})" if data_file else ""
        return DeletionVectorError(
            f"the deletion vector{of} is damaged: {reason}",
            file=location,
            table=table,
            check=reason,
        )

    if len(blob) < 16:
        raise damaged(f"{len(blob)} bytes, too short for a deletion vector")
    (length,) = struct.unpack_from(">I", blob, 0)
    if length != len(blob) - 8:
        raise damaged(f"its length field says {length} bytes, the blob holds {len(blob) - 8}")
    body = blob[4 : 4 + length]
    (crc,) = struct.unpack_from(">I", blob, 4 + length)
    if crc32(body) != crc:
        raise damaged(f"CRC-32 {crc32(body):08x}, the blob says {crc:08x}")
    if body[:4] != DV_MAGIC:
        raise damaged(f"magic {body[:4].hex()}, not {DV_MAGIC.hex()}")
    return _buckets(body, damaged)


def _buckets(body: bytes, damaged: Callable[[str], DeletionVectorError]) -> Positions:
    out = Positions()
    (count,) = struct.unpack_from("<Q", body, 4)
    at, last = 12, -1
    for _ in range(count):
        if at + 4 > len(body):
            raise damaged(f"{count} buckets announced, the vector ends after fewer")
        (key,) = struct.unpack_from("<I", body, at)
        if key <= last or key > 0x7FFFFFFE:
            raise damaged(f"bucket key {key} out of order or out of range")
        size = _portable_size(body, at + 4)
        if size is None or at + 4 + size > len(body):
            raise damaged(f"bucket {key} is not a whole Roaring bitmap")
        try:
            out.buckets[key] = BitMap.deserialize(body[at + 4 : at + 4 + size])
        except ValueError as error:
            raise damaged(f"bucket {key}: {error}") from None
        at, last = at + 4 + size, key
    if at != len(body):
        raise damaged(f"{len(body) - at} bytes after the last bucket")
    return out


#: Roaring's portable cookies: without run containers (a 4-byte count follows), with them (the
#: count is in the cookie's high 16 bits).
_NO_RUNS, _RUNS = 12346, 12347
_ARRAY_MAX = 4096


def _portable_size(data: bytes, at: int) -> int | None:
    """The size of the portable 32-bit Roaring bitmap at ``data[at:]`` from its headers (None:
    they do not describe one that fits): a bucket's end is where the next one starts."""
    if at + 4 > len(data):
        return None
    (cookie,) = struct.unpack_from("<I", data, at)
    if cookie & 0xFFFF == _RUNS:
        n, runs_at, head = (cookie >> 16) + 1, at + 4, at + 4 + ((cookie >> 16) + 8) // 8
        runs = data[runs_at:head]
    elif cookie == _NO_RUNS and at + 8 <= len(data):
        (n,) = struct.unpack_from("<I", data, at + 4)
        runs, head = b"", at + 8
    else:
        return None
    if head + 4 * n > len(data):
        return None
    cards = [c + 1 for c in struct.unpack_from(f"<{2 * n}H", data, head)[1::2]]
    end = head + 4 * n + (4 * n if not runs or n >= 4 else 0)
    for i, card in enumerate(cards):
        if runs and runs[i // 8] >> (i % 8) & 1:
            if end + 2 > len(data):
                return None
            (count,) = struct.unpack_from("<H", data, end)
            end += 2 + 4 * count
        else:
            end += 2 * card if card <= _ARRAY_MAX else 8192
    return end - at if end <= len(data) else None


# ---- Puffin ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class VectorBlob:
    """A DV in a Puffin file: the data file it deletes from, where its blob is, its size."""

    data_file: str
    offset: int
    length: int
    cardinality: int


def puffin_file(
    vectors: Mapping[str, Positions], created_by: str
) -> tuple[bytes, list[VectorBlob]]:
    """A Puffin file holding one DV per data file of ``vectors`` (data file -> positions), and
    where each blob is in it."""
    parts, blobs, meta = [PUFFIN_MAGIC], [], []
    at = len(PUFFIN_MAGIC)
    for data_file, positions in vectors.items():
        blob = encode_vector(positions)
        parts.append(blob)
        blobs.append(VectorBlob(data_file, at, len(blob), len(positions)))
        meta.append(
            {
                "type": DV_BLOB_TYPE,
                "fields": [ROW_POSITION_FIELD_ID],
                "snapshot-id": -1,
                "sequence-number": -1,
                "offset": at,
                "length": len(blob),
                "properties": {
                    "referenced-data-file": data_file,
                    "cardinality": str(len(positions)),
                },
            }
        )
        at += len(blob)
    footer = json.dumps(
        {"blobs": meta, "properties": {"created-by": created_by}}, separators=(",", ":")
    ).encode()
    parts += [PUFFIN_MAGIC, footer, struct.pack("<I", len(footer)), bytes(FOOTER_FLAGS)]
    parts.append(PUFFIN_MAGIC)
    return b"".join(parts), blobs


def puffin_blobs(data: bytes, location: str) -> list[VectorBlob]:
    """The DVs a whole Puffin file lists in its footer (magics, flags and JSON checked; the
    blobs themselves are checked when read: ``decode_vector``)."""

    def damaged(reason: str) -> DeletionVectorError:
        return DeletionVectorError(
            f"the Puffin file is damaged: {reason}", file=location, check=reason
        )

    tail = 4 + FOOTER_FLAGS + len(PUFFIN_MAGIC)
    if len(data) < 2 * len(PUFFIN_MAGIC) + tail or data[:4] != PUFFIN_MAGIC:
        raise damaged("no Puffin magic at its start")
    if data[-4:] != PUFFIN_MAGIC:
        raise damaged("no Puffin magic at its end")
    (size,) = struct.unpack_from("<I", data, len(data) - tail)
    flags = data[len(data) - tail + 4 : len(data) - 4]
    start = len(data) - tail - size
    if any(flags) or start < 8 or data[start - 4 : start] != PUFFIN_MAGIC:
        raise damaged("its footer is compressed, or its size or magic is wrong")
    try:
        footer = json.loads(data[start : start + size])
        return [
            VectorBlob(
                str(b["properties"]["referenced-data-file"]),
                int(b["offset"]),
                int(b["length"]),
                int(b["properties"]["cardinality"]),
            )
            for b in footer["blobs"]
            if b["type"] == DV_BLOB_TYPE
        ]
    except (ValueError, KeyError, TypeError) as error:
        raise damaged(f"its footer is not Puffin JSON ({error})") from None
