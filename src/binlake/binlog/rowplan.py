"""Plans for the native row decoder (``_rowimage.c``, issue #37), made from the same
``ColumnSpec``s as the generated Python decoders of ``binlake.binlog.rowcodec``.

A plan is one ``(op, column index, a, b, obj)`` tuple a column present in the image, in column
order; the C decoder reads it once, when the decoder of a layout is built (``rowcodec`` caches
it like the generated one). Integers, floats, strings and blobs (text through the column's
codec), NEWDECIMAL, YEAR, BIT, ENUM, SET, DATE, DATETIME2, TIMESTAMP2 and TIME2 are decoded in
C; the values the snippets hand to a Python helper (zero dates, odd timestamps) go to the same
helper. Every other column (the old temporal formats, JSON, GEOMETRY, hinted MariaDB types)
holds its Python per-value decoder, ``values.value_decoder(spec)``, which C calls. The pure
Python decoders stay the reference: tests/property/test_rows_roundtrip.py checks that both give
the same values, of the same types, and fail with the same typed errors.
"""

from __future__ import annotations

import importlib
import importlib.machinery
from collections.abc import Callable, Sequence
from decimal import Decimal
from types import ModuleType
from typing import Any, Final

from binlake.binlog import values
from binlake.binlog.constants import ColumnType as T
from binlake.binlog.encodings import temporal
from binlake.binlog.encodings.charsets import charmap_table
from binlake.binlog.encodings.decimals import decimal_groups
from binlake.binlog.values import ABSENT, ColumnSpec, value_decoder

OP_PYTHON, OP_INT, OP_FLOAT, OP_BYTES, OP_TEXT, OP_DECIMAL, OP_YEAR, OP_BIT = range(8)
OP_ENUM, OP_SET, OP_DATE, OP_DATETIME2, OP_TIMESTAMP2, OP_TIME2, OP_COUNT = range(8, 15)
#: How OP_TEXT decodes: the codec named, by name; utf-8; a single-byte codec's table.
TEXT_CODEC, TEXT_UTF8, TEXT_CHARMAP = range(3)


def load_native() -> ModuleType | None:
    """The C extension when this process runs the compiled modules, else None.

    ``binlake.compiled`` decides for the whole process, and runs the compiled modules only when
    the build record names every source as it is now, ``_rowimage.c`` among them; ``binlog``
    imports nothing of ``compiled``'s layer, so the choice is read off ``values``: an extension
    module when compiled, its ``.py`` when pure Python runs."""
    origin = values.__file__ or ""
    if not origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
        return None
    return importlib.import_module("binlake.binlog._rowimage")


#: The C extension, or None: pure Python (``BINLAKE_PURE_PYTHON=1``, no build, a stale build).
NATIVE: Final = load_native()

Op = tuple[int, int, int, int, object]
#: What ``RowsDecoder`` raises for a plan it was not written for (``sizes_fit`` and the like).
PLAN_REFUSALS: Final = (ValueError, TypeError, OverflowError)
RowsDecoder = Callable[[bytes, int, list[Any]], int]

_WIDTH: Final[dict[int, int]] = {T.TINY: 1, T.SHORT: 2, T.INT24: 3, T.LONG: 4, T.LONGLONG: 8}
_STRINGS: Final = frozenset({T.VARCHAR, T.VAR_STRING, T.STRING})
_BLOBS: Final = frozenset({T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB})
_FIXED: Final[dict[int, Callable[[ColumnSpec], tuple[int, int, int, object]]]] = {
    T.YEAR: lambda s: (OP_YEAR, 0, 0, None),
    T.BIT: lambda s: (OP_BIT, s.length, 0, None),
    T.DATE: lambda s: (OP_DATE, 0, 0, temporal._date_bad),
    T.NEWDATE: lambda s: (OP_DATE, 0, 0, temporal._date_bad),
    T.DATETIME2: lambda s: (OP_DATETIME2, s.metadata, 0, temporal._datetime_bad),
    T.TIMESTAMP2: lambda s: (OP_TIMESTAMP2, s.metadata, 0, (temporal._timestamp_bad, temporal.UTC)),
    T.TIME2: lambda s: (OP_TIME2, s.metadata, 0, None),
}


def column_op(spec: ColumnSpec) -> Op:
    """The plan of one column: a native op, or its Python decoder called from C."""
    kind, i = spec.type, spec.index
    if kind in _WIDTH:
        return (OP_INT, i, _WIDTH[kind], int(spec.unsigned), None)
    if kind in (T.FLOAT, T.DOUBLE):
        return (OP_FLOAT, i, 4 if kind == T.FLOAT else 8, 0, None)
    if kind in _FIXED:
        op, a, b, obj = _FIXED[kind](spec)
        return (op, i, a, b, obj)
    if kind == T.NEWDECIMAL:
        groups = decimal_groups(spec.metadata >> 8, spec.metadata & 0xFF)
        size = sum(nbytes for nbytes, _, _ in groups)
        return (OP_DECIMAL, i, spec.metadata & 0xFF, size, (Decimal, groups))
    if kind == T.ENUM and spec.length in (1, 2):
        return (OP_ENUM, i, spec.length, 0, ("", *spec.labels))
    if kind == T.SET and spec.length <= 8 and len(spec.labels) <= 64:
        return (OP_SET, i, spec.length, 0, spec.labels)
    if (kind in _STRINGS and spec.hint is None) or kind in _BLOBS:
        return _bytes_op(spec)
    return (OP_PYTHON, i, 0, 0, value_decoder(spec))


def _bytes_op(spec: ColumnSpec) -> Op:
    prefix = (1 if spec.length < 256 else 2) if spec.type in _STRINGS else spec.length
    if spec.codec == "utf-8":
        return (OP_TEXT, spec.index, prefix, TEXT_UTF8, spec.codec)
    if spec.codec is not None:
        table = charmap_table(spec.codec)  # MariaDB's latin1 and the other single-byte ones
        if table is not None:
            return (OP_TEXT, spec.index, prefix, TEXT_CHARMAP, table)
        return (OP_TEXT, spec.index, prefix, TEXT_CODEC, spec.codec)
    pad = spec.length if spec.type == T.STRING else 0  # BINARY(n) padded back to n bytes
    return (OP_BYTES, spec.index, prefix, pad, None)


def image_plan(specs: Sequence[ColumnSpec]) -> tuple[Op, ...]:
    """The plan of one image layout: an op per present column, in column order."""
    return tuple(column_op(spec) for spec in specs)


def native_rows_decoder(
    kind: str,
    before: Sequence[ColumnSpec],
    after: Sequence[ColumnSpec],
    column_count: int,
) -> RowsDecoder | None:
    """The C ``(buf, end, out) -> end`` of one rows layout (as ``rowcodec.rows_decoder``'s),
    or None when the extension is not loaded, or refuses the plan: sizes its reads are not
    written for (a damaged table map's, say a string column of no length), which the generated
    decoder, the reference, then decodes or refuses with its own typed error."""
    if NATIVE is None:
        return None
    try:
        decoder: RowsDecoder = NATIVE.RowsDecoder(
            image_plan(before), image_plan(after), kind, column_count, ABSENT
        )
    except PLAN_REFUSALS:
        return None
    return decoder
