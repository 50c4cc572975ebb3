"""Each source column's text-protocol cells -> the exact Arrow array binlake writes for it.

The mapping is docs/spark.md's (``binlake.typemap``); ``columns.CopyColumn`` carries what a task
needs of it. Columnar (numpy over the raw bytes, or one Arrow cast of a zero-copy
``binary_view``):

==============================  ======================  ==========================================
source                          lake                    how
==============================  ======================  ==========================================
TINYINT..INT, YEAR              int                     Arrow cast (digits -> int32)
INT UNSIGNED, BIGINT            long                    Arrow cast
BIGINT UNSIGNED                 decimal(20,0)           Arrow cast (exact; no float on the way)
BIT(n)                          long / decimal(20,0)    ``CAST(c AS UNSIGNED)``, Arrow cast
DECIMAL(p,s), p <= 38           decimal(p,s)            Arrow cast (it refuses to round)
DECIMAL(p,s), p > 38            string                  the server's text (plain, scale kept)
FLOAT / DOUBLE                  float / double          ``CAST(c AS DOUBLE)`` (the exact float32
                                                        value), Arrow cast
DATE, DATETIME(fsp)             date, timestamp         numpy on the fixed-width text: fields,
TIMESTAMP(fsp)                  timestamptz (UTC)       calendar check, days from civil; zero,
                                                        partly zero and invalid dates (and year
                                                        0, which Python cannot hold) -> null,
                                                        counted; TIMESTAMP read in a UTC session;
                                                        in C (``_textcells.temporal``) when the
                                                        compiled modules run
TIME(fsp)                       long (microseconds)     numpy (sign, 2-3 hour digits, fraction)
text in utf8mb3/utf8mb4         string                  Arrow cast binary -> string (validates
(CHAR..TEXT, ENUM, SET, JSON)                           UTF-8: invalid bytes are an error)
text in ascii                   string                  the same, plus "every byte < 0x80"
BINARY..BLOB                    binary                  Arrow cast (BINARY(n) padding kept)
UUID, INET4, INET6              string                  the server's text
==============================  ======================  ==========================================

Per value (a Python loop over the column): text in any other charset (binlake's exact codecs,
``binlake.binlog.encodings.charsets``; undecodable bytes raise ``ValueDecodeError``), GEOMETRY
(WKB; EWKB with a non-zero SRID, ``typemap.geometry_wkb``).

A cell that is not what its type promises (bytes invalid in the charset, a date of another
width) is a ``ValueDecodeError`` naming the column: never written, never replaced.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from binlake.binlog.encodings.charsets import decode_text
from binlake.binlog.values import Geometry
from binlake.errors import ValueDecodeError
from binlake.snapshot.cells import Cells, Ints, Mask, as_binary_view
from binlake.snapshot.columns import GEOMETRY_KINDS, UTF8_CHARSETS, CopyColumn
from binlake.snapshot.result_set import NATIVE
from binlake.typemap import geometry_wkb

_DAYS_IN_MONTH: Final = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], np.int64)
_MICROS_PER_DAY: Final = 86_400_000_000

#: Zero dates nulled, per column name.
ZeroDates = Counter[str]
Decoder = Callable[[Cells, ZeroDates], pa.Array]


def decoder(spec: CopyColumn) -> Decoder:
    """The function turning a block's cells of ``spec`` into its Arrow array."""
    kind, target = spec.kind, spec.arrow_type()
    if kind == "date":
        return lambda cells, zero: _dates(cells, spec, zero)
    if kind in ("datetime", "timestamp"):
        return lambda cells, zero: _timestamps(cells, spec, target, zero)
    if kind == "time":
        return lambda cells, zero: _times(cells, spec)
    if kind in GEOMETRY_KINDS:
        return lambda cells, zero: _per_value(cells, _geometry, pa.binary())
    if kind == "float":
        return lambda cells, zero: pc.cast(_cast(cells, spec, pa.float64()), target)
    if spec.is_text:
        return _text_decoder(spec)
    return lambda cells, zero: _cast(cells, spec, target)


def _cast(cells: Cells, spec: CopyColumn, target: pa.DataType) -> pa.Array:
    try:
        return pc.cast(as_binary_view(cells), target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise _bad(spec, f"a value is not a {target}: {error}") from None


def _text_decoder(spec: CopyColumn) -> Decoder:
    if spec.charset in UTF8_CHARSETS:
        return lambda cells, zero: _utf8(cells, spec)
    if spec.charset == "ascii":
        return lambda cells, zero: _ascii(cells, spec)
    charset = spec.charset
    return lambda cells, zero: _per_value(cells, lambda raw: _text(raw, charset, spec), pa.string())


def _bad(spec: CopyColumn, text: str) -> ValueDecodeError:
    return ValueDecodeError(f"column {spec.name} ({spec.kind}): {text}")


def _text(raw: bytes, charset: str, spec: CopyColumn) -> str:
    try:
        return decode_text(raw, charset)
    except ValueDecodeError as error:
        raise _bad(spec, error.message) from None


def _utf8(cells: Cells, spec: CopyColumn) -> pa.Array:
    try:
        return pc.cast(as_binary_view(cells), pa.string())
    except pa.ArrowInvalid as error:
        raise _bad(spec, f"bytes invalid in {spec.charset}: {error}") from None


def _ascii(cells: Cells, spec: CopyColumn) -> pa.Array:
    out = pc.cast(as_binary_view(cells), pa.binary())
    data = out.buffers()[2]
    if data is not None and len(data) and np.frombuffer(data, np.uint8).max() >= 0x80:
        raise _bad(spec, "a byte >= 0x80 in an ascii column")
    return pc.cast(out, pa.string())


def _per_value(cells: Cells, convert: Callable[[bytes], object], target: pa.DataType) -> pa.Array:
    values = []
    for row in range(cells.rows):
        raw = cells.value(row)
        values.append(None if raw is None else convert(raw))
    return pa.array(values, target)


def _geometry(raw: bytes) -> bytes:
    """MariaDB's internal geometry (a 4-byte SRID, then WKB) as binlake writes it."""
    return geometry_wkb(Geometry(int.from_bytes(raw[:4], "little"), raw[4:]))


# ---- temporal: numpy over the fixed-width text -------------------------------------------


#: Where the fields of ``YYYY-MM-DD hh:mm:ss.ffffff`` are (offset, digits).
_YEAR, _MONTH, _DAY, _HOUR, _MINUTE, _SECOND = (0, 4), (5, 2), (8, 2), (11, 2), (14, 2), (17, 2)
_SEPARATORS: Final = {4: 0x2D, 7: 0x2D, 10: 0x20, 13: 0x3A, 16: 0x3A, 19: 0x2E}


def _fixed_text(cells: Cells, spec: CopyColumn, width: int) -> npt.NDArray[np.int64]:
    """Each cell's ``width`` bytes as digit values (separators as they are), after checking
    that every non-NULL cell is exactly ``width`` bytes of digits and the separators."""
    live = ~cells.nulls
    if (cells.lengths[live] != width).any():
        raise _bad(spec, f"a value that is not {width} bytes long")
    matrix = cells.fixed(width)
    separators = [k for k in _SEPARATORS if k < width]
    digits = [k for k in range(width) if k not in _SEPARATORS]
    shown = matrix[live]
    expected = np.array([_SEPARATORS[k] for k in separators], dtype=np.uint8)
    if ((shown[:, digits] - 0x30) > 9).any() or (shown[:, separators] != expected).any():
        raise _bad(spec, "a value of unexpected form")
    return matrix.astype(np.int64) - 0x30


def _field(matrix: npt.NDArray[np.int64], where: tuple[int, int]) -> Ints:
    offset, count = where
    weights = 10 ** np.arange(count - 1, -1, -1, dtype=np.int64)
    return matrix[:, offset : offset + count] @ weights


def _calendar_days(matrix: npt.NDArray[np.int64]) -> tuple[Ints, Mask]:
    """Days since 1970-01-01 of each row's ``YYYY-MM-DD``, and which rows hold a real
    calendar date (year >= 1; zero, partly zero and invalid dates do not)."""
    year, month, day = _field(matrix, _YEAR), _field(matrix, _MONTH), _field(matrix, _DAY)
    month_ok = (month >= 1) & (month <= 12)
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    limit = _DAYS_IN_MONTH[np.where(month_ok, month, 0)] + (leap & (month == 2))
    valid = (year >= 1) & month_ok & (day >= 1) & (day <= limit)
    # days from civil (proleptic Gregorian), as in H. Hinnant's chrono algorithms
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * np.where(month > 2, month - 3, month + 9) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468, valid


def _nulls_for_invalid(cells: Cells, valid: Mask, spec: CopyColumn, zero: ZeroDates) -> Mask:
    invalid = ~cells.nulls & ~valid
    if invalid.any():
        zero[spec.name] += int(invalid.sum())
    return cells.nulls | invalid


def _validity(nulls: Mask) -> pa.Buffer | None:
    return pa.py_buffer(np.packbits(~nulls, bitorder="little")) if nulls.any() else None


def _dates(cells: Cells, spec: CopyColumn, zero: ZeroDates) -> pa.Array:
    days, nulls = _temporal(cells, spec, 10, zero)
    values = days.astype(np.int32)
    return pa.Array.from_buffers(pa.date32(), cells.rows, [_validity(nulls), pa.py_buffer(values)])


def _timestamps(cells: Cells, spec: CopyColumn, target: pa.DataType, zero: ZeroDates) -> pa.Array:
    fsp = spec.fsp
    values, nulls = _temporal(cells, spec, 19 + (fsp + 1 if fsp else 0), zero)
    return pa.Array.from_buffers(target, cells.rows, [_validity(nulls), pa.py_buffer(values)])


def _temporal(cells: Cells, spec: CopyColumn, width: int, zero: ZeroDates) -> tuple[Ints, Mask]:
    """Days (``width`` 10) or microseconds of each cell, 0 where it is NULL or no calendar
    date (counted in ``zero``), and those rows: in C (``_textcells.temporal``) when it is
    loaded and every cell is well formed, else with numpy (``temporal_values``), which raises
    the typed error of a malformed cell."""
    found = None
    if NATIVE is not None:
        found = NATIVE.temporal(cells.data, cells.starts, cells.lengths, cells.nulls, width)
    if found is None:
        values, valid = temporal_values(cells, spec, width)
    else:
        values, valid = np.frombuffer(found[0], np.int64), ~np.frombuffer(found[1], np.bool_)
    nulls = _nulls_for_invalid(cells, valid, spec, zero)
    return np.where(nulls, 0, values), nulls


def temporal_values(cells: Cells, spec: CopyColumn, width: int) -> tuple[Ints, Mask]:
    """Days (``width`` 10: DATE) or microseconds (DATETIME, TIMESTAMP: 19, or 21 to 26 with a
    fraction) of each cell, and which cells hold a calendar date (``_textcells.temporal``'s
    reference; NULL cells' values are garbage: masked by the caller)."""
    matrix = _fixed_text(cells, spec, width)
    days, valid = _calendar_days(matrix)
    if width == 10:
        return days, valid
    clock = _field(matrix, _HOUR) * 3600 + _field(matrix, _MINUTE) * 60 + _field(matrix, _SECOND)
    micros = clock * 1_000_000
    if width > 19:
        micros += _field(matrix, (20, width - 20)) * 10 ** (26 - width)
    return days * _MICROS_PER_DAY + micros, valid


def _digits(cells: Cells, offset: int, count: int) -> Ints:
    """The number written by ``count`` ASCII digits at ``offset`` in each cell."""
    data, at = cells.data, cells.starts + offset
    value = np.zeros(cells.rows, dtype=np.int64)
    for k in range(count):
        value = value * 10 + (data[at + k].astype(np.int64) - 48)
    return value


def _times(cells: Cells, spec: CopyColumn) -> pa.Array:
    """``[-]H?HH:MM:SS[.f{fsp}]`` -> signed microseconds (beyond 24 h kept)."""
    fsp = spec.fsp
    tail = 6 + (fsp + 1 if fsp else 0)  # ":MM:SS" and ".fff"
    live = ~cells.nulls
    data, starts, lengths = cells.data, cells.starts, cells.lengths
    negative = live & (data[np.where(live, starts, 0)] == 0x2D)
    hour_digits = lengths - negative - tail
    if (live & ((hour_digits < 2) | (hour_digits > 3))).any():
        raise _bad(spec, "a TIME value of unexpected length")
    end = starts + lengths
    hours = np.zeros(cells.rows, dtype=np.int64)
    first = starts + negative
    for k in range(3):
        has = live & (k < hour_digits)
        digit = data[np.where(has, first + k, 0)].astype(np.int64) - 48
        hours = np.where(has, hours * 10 + digit, hours)
    rest = Cells(data, np.where(live, end - tail, 0), cells.lengths, cells.nulls)
    minute, second = _digits(rest, 1, 2), _digits(rest, 4, 2)
    micros = ((hours * 60 + minute) * 60 + second) * 1_000_000
    if fsp:
        micros += _digits(rest, 7, fsp) * 10 ** (6 - fsp)
    values = np.where(cells.nulls, 0, np.where(negative, -micros, micros))
    return pa.Array.from_buffers(
        pa.int64(), cells.rows, [cells.validity(), pa.py_buffer(values.astype(np.int64))]
    )
