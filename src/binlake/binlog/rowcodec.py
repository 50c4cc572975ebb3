"""Row images: decoders generated per column layout, and the matching encoder.

A row image is a NULL bitmap (one bit per column present in the event's column bitmap, bit 0 of
byte 0 first; padding bits are set) followed by the non-NULL values of the present columns in
column order.

Decoding is the hot path of the whole replicator. When the compiled modules run, a rows event's
images are decoded in C (``binlake.binlog.rowplan`` and ``_rowimage.c``); the Python decoders
below are the reference and the pure-Python fallback. For each (table map, column bitmap, hints)
``image_decoder`` writes the source of one function that decodes a whole image with every
column's read inlined (the statements come from ``values.value_source``, the same ones
``values.decode_value`` runs for a single value), compiles it once and caches it. The generated
function does no bounds checks of its own: a value that runs past the data shows up as an end
position beyond it, and any exception is re-examined by ``diagnose_image``, which walks the image
column by column with the checked decoders and raises a precise, typed error.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from binlake.binlog.constants import ColumnType
from binlake.binlog.errors import BinlakeError, InvalidEventError, ValueDecodeError
from binlake.binlog.rowplan import native_rows_decoder
from binlake.binlog.tablemap import TableMap
from binlake.binlog.values import (
    ABSENT,
    ColumnSpec,
    column_spec,
    decode_value,
    encode_value,
    value_end,
)
from binlake.binlog.values import value_source as _value_source

Row = tuple[Any, ...]
ImageDecoder = Callable[[bytes, int], tuple[Row, int]]
RowsDecoder = Callable[[bytes, int, list[tuple[Row | None, Row | None]]], int]
Hints = tuple[tuple[int, str], ...]

#: Exceptions a generated decoder can raise on malformed bytes (all become typed errors).
DECODE_FAILURES = (
    BinlakeError,
    IndexError,
    ValueError,
    OverflowError,
    KeyError,
    struct.error,
)


def present_columns(bitmap: int, column_count: int) -> tuple[int, ...]:
    """The column indexes whose bit is set (bit i = column i)."""
    return tuple(i for i in range(column_count) if bitmap >> i & 1)


@lru_cache(maxsize=2048)
def image_specs(tm: TableMap, bitmap: int, hints: Hints = ()) -> tuple[ColumnSpec, ...]:
    """The specs of the columns present in ``bitmap``, in column order."""
    hint_of = dict(hints)
    return tuple(
        column_spec(tm, c, hint_of.get(c)) for c in present_columns(bitmap, tm.column_count)
    )


def _compile(source: str, name: str, namespace: dict[str, Any]) -> Any:
    exec(compile(source, f"<binlake {name}>", "exec"), namespace)
    return namespace[name]


def _signature(name: str, params: str, namespace: dict[str, Any]) -> str:
    # Every helper becomes a keyword-only default: a local variable, the fastest lookup.
    helpers = ", ".join(f"{n}={n}" for n in sorted(namespace) if n.startswith("_"))
    return f"def {name}({params}, *, {helpers}):"


@lru_cache(maxsize=2048)
def image_decoder(tm: TableMap, bitmap: int, hints: Hints = ()) -> ImageDecoder:
    """The compiled decoder ``(buf, pos) -> (row, end)`` of one image layout."""
    namespace: dict[str, Any] = {"_ABSENT": ABSENT}
    body, row = image_source(image_specs(tm, bitmap, hints), tm.column_count, namespace, "v")
    lines = [_signature("decode_image", "b, p", namespace)]
    lines += [f"    {line}" for line in body] + [f"    return {row}, p"]
    decoder: ImageDecoder = _compile("\n".join(lines) + "\n", "decode_image", namespace)
    return decoder


@lru_cache(maxsize=2048)
def rows_decoder(
    tm: TableMap, kind: str, bitmap: int, after_bitmap: int, hints: Hints = ()
) -> RowsDecoder:
    """The ``(buf, end, out) -> end`` that appends every row's (before, after) to ``out``: the
    C decoder of ``binlake.binlog.rowplan`` when its extension is loaded, else the generated
    one. Both give the same values and fail on the same bytes."""
    before, after = image_specs(tm, bitmap, hints), image_specs(tm, after_bitmap, hints)
    native = native_rows_decoder(kind, before, after, tm.column_count)
    if native is not None:
        return native
    return generated_rows_decoder(tm, kind, bitmap, after_bitmap, hints)


@lru_cache(maxsize=2048)
def generated_rows_decoder(
    tm: TableMap, kind: str, bitmap: int, after_bitmap: int, hints: Hints = ()
) -> RowsDecoder:
    """The generated ``(buf, end, out) -> end`` (the reference): all row images of one event
    decoded in a single generated loop."""
    namespace: dict[str, Any] = {"_ABSENT": ABSENT}
    body, row = image_source(image_specs(tm, bitmap, hints), tm.column_count, namespace, "v")
    if kind == "update":
        specs = image_specs(tm, after_bitmap, hints)
        after_body, after_row = image_source(specs, tm.column_count, namespace, "w")
        body += after_body
        change = f"({row}, {after_row})"
    else:
        change = f"(None, {row})" if kind == "write" else f"({row}, None)"
    lines = [
        _signature("decode_all", "b, end, out", namespace),
        "    p = 0",
        "    add = out.append",
    ]
    lines += ["    while p < end:"] + [f"        {line}" for line in body]
    lines += [f"        add({change})", "    return p"]
    decoder: RowsDecoder = _compile("\n".join(lines) + "\n", "decode_all", namespace)
    return decoder


def image_source(
    specs: Sequence[ColumnSpec], column_count: int, namespace: dict[str, Any], prefix: str
) -> tuple[list[str], str]:
    """Statements decoding one image at ``b[p:]`` into ``{prefix}{column}`` variables, and the
    expression of the row tuple."""
    null_bytes = (len(specs) + 7) // 8
    mask = (1 << len(specs)) - 1
    namespace["_from_bytes"] = int.from_bytes
    reads = [_value_source(spec, f"{prefix}{spec.index}", namespace) for spec in specs]
    if null_bytes == 1:
        lines = [f"_nb = b[p] & {mask:#x}; p += 1"]
    else:
        lines = [f"_nb = _from_bytes(b[p:p + {null_bytes}], 'little') & {mask:#x}"]
        lines.append(f"p += {null_bytes}")
    lines.append("if not _nb:")
    for read in reads:
        lines += [f"    {line}" for line in read]
    lines.append("else:")
    for bit, (spec, read) in enumerate(zip(specs, reads, strict=True)):
        lines.append(f"    if _nb & {1 << bit:#x}: {prefix}{spec.index} = None")
        lines.append("    else:")
        lines += [f"        {line}" for line in read]
    present = {spec.index for spec in specs}
    names = [f"{prefix}{i}" if i in present else "_ABSENT" for i in range(column_count)]
    return lines, f"({', '.join(names)}{',' if column_count == 1 else ''})"


def walk_image(
    specs: Sequence[ColumnSpec], buf: bytes, pos: int, offset: int | None, event_type: str
) -> int:
    """Decode the image at ``buf[pos:]`` column by column with checked decoders; the position
    after it, or a typed error naming the column that fails."""
    null_bytes = (len(specs) + 7) // 8
    table = specs[0].table if specs else None
    if pos + null_bytes > len(buf):
        raise _truncated("a NULL bitmap", offset, event_type, table)
    null_bits = int.from_bytes(buf[pos : pos + null_bytes], "little")
    pos += null_bytes
    for bit, spec in enumerate(specs):
        if null_bits >> bit & 1:
            continue
        if value_end(spec, buf, pos) > len(buf):
            raise _truncated(f"column {spec.name}", offset, event_type, table)
        try:
            _, pos = decode_value(spec, buf, pos)
        except ValueDecodeError as error:
            error.offset, error.event_type = offset, event_type
            if spec.type in _OLD_TEMPORAL:
                error.hint = _OLD_TEMPORAL_HINT
            raise
    return pos


_OLD_TEMPORAL = frozenset({ColumnType.TIMESTAMP, ColumnType.TIME, ColumnType.DATETIME})
_OLD_TEMPORAL_HINT = (
    "old-format TIME/DATETIME/TIMESTAMP columns with fractional seconds (created with "
    "mysql56_temporal_format=OFF) cannot be read from a binlog; ALTER TABLE ... FORCE converts them"
)


def _truncated(
    what: str, offset: int | None, event_type: str, table: str | None
) -> InvalidEventError:
    return InvalidEventError(
        f"the rows data ends inside {what}", offset=offset, event_type=event_type, table=table
    )


def encode_image(specs: Sequence[ColumnSpec], row: Row) -> bytes:
    """The row image of ``row`` (values of all columns; only ``specs``' columns are written)."""
    null_bytes = (len(specs) + 7) // 8
    null_bits = (1 << (8 * null_bytes)) - 1
    parts = []
    for bit, spec in enumerate(specs):
        value = row[spec.index]
        if value is ABSENT:
            raise ValueError(f"column {spec.name} is in the column bitmap but ABSENT in the row")
        if value is None:
            continue
        null_bits &= ~(1 << bit)
        parts.append(encode_value(spec, value))
    return null_bits.to_bytes(null_bytes, "little") + b"".join(parts)
