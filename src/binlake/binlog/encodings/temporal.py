"""Date and time column values: binlog bytes <-> ``datetime`` objects, exactly.

The MySQL 5.6 formats (DATETIME2, TIMESTAMP2, TIME2; what MariaDB 10.11 and MySQL write) are
big-endian with an offset for the sign and 0-3 bytes of fractional seconds; the old formats
(DATETIME, TIME, TIMESTAMP, DATE/NEWDATE) are little-endian integers. Zero and partly zero dates
('0000-00-00', '2020-00-15') and dates that are not real calendar days (ALLOW_INVALID_DATES) come
back as ``ZeroDate``, never guessed into a real date. Fields no server can store (minute 61,
month 14) raise ``ValueDecodeError``.

DATETIME2, TIMESTAMP2 and DATE, the common ones, are decoded by the statements that
``*_source`` functions emit for the generated row decoders (see ``binlake.binlog.values``); the
others by ``decode_*(buf, pos[, fsp])``. ``*_size(fsp)`` is the number of bytes a value takes;
encoders return exactly those bytes.
"""

from __future__ import annotations

import datetime as dt
import functools
import struct
from dataclasses import dataclass
from typing import Any

from binlake.binlog.errors import ValueDecodeError

UTC = dt.UTC
DATETIMEF_INT_OFS = 0x8000000000
TIMEF_INT_OFS = 0x800000
TIMEF_OFS = 0x800000000000
_FRAC_BYTES = (0, 1, 1, 2, 2, 3, 3)
_FRAC_SCALE = (1, 10000, 10000, 100, 100, 1, 1)
_MICRO = 1_000_000
_ONE_MICRO = dt.timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class ZeroDate:
    """A DATE/DATETIME/TIMESTAMP value that is not a real point in time, kept as stored."""

    year: int
    month: int
    day: int
    hour: int = 0
    minute: int = 0
    second: int = 0
    microsecond: int = 0
    #: Fractional digits the column declares (for ``text``).
    fsp: int = 0
    #: False for DATE columns.
    has_time: bool = True

    @property
    def text(self) -> str:
        """The value as MariaDB prints it, e.g. ``0000-00-00 00:00:00.000``."""
        out = f"{self.year:04d}-{self.month:02d}-{self.day:02d}"
        if not self.has_time:
            return out
        out += f" {self.hour:02d}:{self.minute:02d}:{self.second:02d}"
        if self.fsp:
            out += f".{self.microsecond:06d}"[: self.fsp + 1]
        return out

    def __str__(self) -> str:
        return self.text


def frac_size(fsp: int) -> int:
    """Bytes of fractional seconds for ``fsp`` digits."""
    return _FRAC_BYTES[fsp]


def _check_fsp(fsp: int) -> None:
    if not 0 <= fsp <= 6:
        raise ValueDecodeError(f"fractional seconds precision {fsp} is outside 0..6")


def _frac_bytes(microsecond: int, fsp: int) -> bytes:
    size = _FRAC_BYTES[fsp]
    scale = _FRAC_SCALE[fsp]
    if microsecond % (10 ** (6 - fsp)):
        raise ValueError(f"{microsecond} microseconds do not fit {fsp} fractional digits")
    return (microsecond // scale).to_bytes(size, "big") if size else b""


def make_datetime(
    year: int, month: int, day: int, hour: int, minute: int, second: int, micro: int, fsp: int
) -> dt.datetime | ZeroDate:
    """A naive datetime, or ZeroDate when the date part is zero or not a calendar day."""
    if hour > 23 or minute > 59 or second > 59 or year > 9999:
        raise ValueDecodeError(
            f"datetime fields {year}-{month}-{day} {hour}:{minute}:{second} are out of range"
        )
    try:
        return dt.datetime(year, month, day, hour, minute, second, micro)
    except ValueError:
        return ZeroDate(year, month, day, hour, minute, second, micro, fsp)


def make_date(year: int, month: int, day: int) -> dt.date | ZeroDate:
    """A date, or ZeroDate when it is zero, partly zero or not a calendar day."""
    if month > 12 or year > 9999:
        raise ValueDecodeError(f"date fields {year}-{month}-{day} are out of range")
    try:
        return dt.date(year, month, day)
    except ValueError:
        return ZeroDate(year, month, day, has_time=False)


def _fields(value: dt.datetime | dt.date | ZeroDate) -> tuple[int, int, int, int, int, int, int]:
    if isinstance(value, ZeroDate):
        v = value
        return v.year, v.month, v.day, v.hour, v.minute, v.second, v.microsecond
    if isinstance(value, dt.datetime):
        t = value
        return t.year, t.month, t.day, t.hour, t.minute, t.second, t.microsecond
    return value.year, value.month, value.day, 0, 0, 0, 0


# ---- DATETIME2 ------------------------------------------------------------------------------


def datetime2_size(fsp: int) -> int:
    return 5 + _FRAC_BYTES[fsp]


def encode_datetime2(value: dt.datetime | ZeroDate, fsp: int) -> bytes:
    year, month, day, hour, minute, second, micro = _fields(value)
    ymd = (year * 13 + month) << 5 | day
    packed = ymd << 17 | hour << 12 | minute << 6 | second
    return (packed + DATETIMEF_INT_OFS).to_bytes(5, "big") + _frac_bytes(micro, fsp)


# ---- TIMESTAMP2 -----------------------------------------------------------------------------


def timestamp2_size(fsp: int) -> int:
    return 4 + _FRAC_BYTES[fsp]


def _epoch_seconds(value: dt.datetime | ZeroDate) -> tuple[int, int]:
    if isinstance(value, ZeroDate):
        if any(_fields(value)):
            raise ValueError("a TIMESTAMP can only hold the all-zero ZeroDate")
        return 0, 0
    if value.tzinfo is None:
        raise ValueError("TIMESTAMP values must be aware datetimes")
    delta = value - dt.datetime(1970, 1, 1, tzinfo=UTC)
    return delta // dt.timedelta(seconds=1), value.microsecond


def encode_timestamp2(value: dt.datetime | ZeroDate, fsp: int) -> bytes:
    seconds, micro = _epoch_seconds(value)
    return seconds.to_bytes(4, "big") + _frac_bytes(micro, fsp)


# ---- TIME2 ----------------------------------------------------------------------------------


def time2_size(fsp: int) -> int:
    return 3 + _FRAC_BYTES[fsp]


def _time2_packed(buf: bytes, pos: int, fsp: int) -> int:
    if fsp >= 5:
        return int.from_bytes(buf[pos : pos + 6], "big") - TIMEF_OFS
    intpart = int.from_bytes(buf[pos : pos + 3], "big") - TIMEF_INT_OFS
    size = _FRAC_BYTES[fsp]
    if size == 0:
        return intpart << 24
    frac = int.from_bytes(buf[pos + 3 : pos + 3 + size], "big")
    if intpart < 0 and frac:
        intpart += 1
        frac -= 1 << (8 * size)
    return (intpart << 24) + frac * _FRAC_SCALE[fsp]


def decode_time2(buf: bytes, pos: int, fsp: int) -> dt.timedelta:
    """TIME(fsp) in the 5.6 format: a timedelta (negative and beyond 24 hours allowed)."""
    _check_fsp(fsp)
    packed = _time2_packed(buf, pos, fsp)
    magnitude = -packed if packed < 0 else packed
    intpart, micro = magnitude >> 24, magnitude & 0xFFFFFF
    hour, minute, second = intpart >> 12, intpart >> 6 & 63, intpart & 63
    if hour > 1023 or minute > 59 or second > 59 or micro >= _MICRO:
        raise ValueDecodeError(f"TIME fields {hour}:{minute}:{second}.{micro} are out of range")
    total = ((hour * 60 + minute) * 60 + second) * _MICRO + micro
    return dt.timedelta(microseconds=-total if packed < 0 else total)


def _time_parts(value: dt.timedelta) -> tuple[bool, int, int, int, int]:
    total = value // _ONE_MICRO
    negative = total < 0
    seconds, micro = divmod(abs(total), _MICRO)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return negative, hour, minute, second, micro


def encode_time2(value: dt.timedelta, fsp: int) -> bytes:
    negative, hour, minute, second, micro = _time_parts(value)
    if hour > 1023:
        raise ValueError(f"TIME value {value} is beyond 1023 hours")
    _frac_bytes(micro, fsp)  # checks that the value fits fsp
    magnitude = (hour << 12 | minute << 6 | second) << 24 | micro
    packed = -magnitude if negative else magnitude
    if fsp >= 5:
        return (packed + TIMEF_OFS).to_bytes(6, "big")
    size = _FRAC_BYTES[fsp]
    intpart = (packed >> 24) + TIMEF_INT_OFS
    if size == 0:
        return intpart.to_bytes(3, "big")
    # The server stores the C remainder of the packed value, which has the value's sign.
    frac = micro // _FRAC_SCALE[fsp]
    stored = (-frac if negative else frac) & ((1 << (8 * size)) - 1)
    return intpart.to_bytes(3, "big") + stored.to_bytes(size, "big")


# ---- source snippets for the generated row decoders (see binlake.binlog.values) ------------

_DATETIME2_READ = {  # fsp -> (struct format after '>BHH', microseconds expression)
    0: ("", ""),
    1: ("B", "_f * 10000"),
    2: ("B", "_f * 10000"),
    3: ("H", "_f * 100"),
    4: ("H", "_f * 100"),
    5: ("BH", "_f << 16 | _g"),
    6: ("BH", "_f << 16 | _g"),
}


def datetime2_source(fsp: int, v: str, ns: dict[str, Any]) -> list[str]:
    """Statements decoding a DATETIME(fsp) at ``b[p:]`` into ``v`` (see ``values``): read as
    three small big-endian integers, cheaper than one 40-bit one."""
    fmt, micro = _DATETIME2_READ[fsp]
    name = f"_unpack_dt{fsp}"
    ns[name] = struct.Struct(">BHH" + fmt).unpack_from
    ns.update(_datetime=dt.datetime, _dt_bad=_datetime_bad)
    names = "_h, _m, _l" + {"": "", "B": ", _f", "H": ", _f", "BH": ", _f, _g"}[fmt]
    args = "(_h - 128) << 10 | _m >> 6"
    return [
        f"{names} = {name}(b, p); p += {datetime2_size(fsp)}",
        f"_y = {args}",
        f"try: {v} = _datetime(_y // 13, _y % 13, _m >> 1 & 31, _l >> 12 | (_m & 1) << 4,"
        f" _l >> 6 & 63, _l & 63{', ' + micro if micro else ''})",
        f"except (ValueError, OverflowError): {v} = _dt_bad((_h << 32 | _m << 16 | _l) - "
        f"{DATETIMEF_INT_OFS:#x}, {micro or '0'}, {fsp})",
    ]


def _datetime_bad(packed: int, micro: int, fsp: int) -> dt.datetime | ZeroDate:
    if packed < 0:
        raise ValueDecodeError("negative DATETIME value")
    ym = packed >> 22
    fields = (ym // 13, ym % 13, packed >> 17 & 31, packed >> 12 & 31, packed >> 6 & 63)
    if micro >= 1_000_000:
        raise ValueDecodeError(f"fractional seconds {micro} are not below one second")
    return make_datetime(*fields, packed & 63, micro, fsp)


@functools.lru_cache(maxsize=65536)
def utc_fields(seconds: int) -> tuple[int, int, int, int, int, int]:
    """Year..second of a Unix time in UTC; cached, since a load's rows share few distinct seconds
    and building a datetime from fields is ~5x cheaper than ``fromtimestamp().replace()``."""
    t = dt.datetime.fromtimestamp(seconds, UTC)
    return (t.year, t.month, t.day, t.hour, t.minute, t.second)


def timestamp2_source(fsp: int, v: str, ns: dict[str, Any]) -> list[str]:
    """Statements decoding a TIMESTAMP(fsp) at ``b[p:]`` into ``v``."""
    frac = frac_size(fsp)
    ns.update(_datetime=dt.datetime, _utc_fields=utc_fields, _UTC=UTC, _ts_bad=_timestamp_bad)
    ns["_unpack_be_I"] = struct.Struct(">I").unpack_from
    lines = ["_x, = _unpack_be_I(b, p)"]
    if frac == 0:
        return [
            *lines,
            f"{v} = _datetime(*_utc_fields(_x), 0, _UTC) if _x else _ts_bad(0, 0, 0); p += 4",
        ]
    return [
        *lines,
        f"_f = _from_bytes(b[p + 4:p + {4 + frac}], 'big') * {_FRAC_SCALE[fsp]}; p += {4 + frac}",
        f"if _x and _f < 1000000: {v} = _datetime(*_utc_fields(_x), _f, _UTC)",
        f"else: {v} = _ts_bad(_x, _f, {fsp})",
    ]


def _timestamp_bad(seconds: int, micro: int, fsp: int) -> dt.datetime | ZeroDate:
    if micro >= 1_000_000:
        raise ValueDecodeError(f"fractional seconds {micro} are not below one second")
    if seconds == 0 and micro == 0:
        return ZeroDate(0, 0, 0, fsp=fsp)
    return dt.datetime.fromtimestamp(seconds, UTC).replace(microsecond=micro)


def date_source(fsp: int, v: str, ns: dict[str, Any]) -> list[str]:
    """Statements decoding a DATE at ``b[p:]`` into ``v`` (``fsp`` is unused)."""
    ns.update(_date=dt.date, _date_bad=_date_bad)
    return [
        "_x = b[p] | b[p + 1] << 8 | b[p + 2] << 16; p += 3",
        f"try: {v} = _date(_x >> 9, _x >> 5 & 15, _x & 31)",
        f"except ValueError: {v} = _date_bad(_x)",
    ]


def _date_bad(value: int) -> dt.date | ZeroDate:
    return make_date(value >> 9, value >> 5 & 15, value & 31)


# ---- the old formats ------------------------------------------------------------------------


def encode_date(value: dt.date | ZeroDate) -> bytes:
    year, month, day = _fields(value)[:3]
    return (year << 9 | month << 5 | day).to_bytes(3, "little")


def decode_datetime_old(buf: bytes, pos: int) -> dt.datetime | ZeroDate:
    """The old DATETIME: an 8-byte integer YYYYMMDDhhmmss."""
    value = int.from_bytes(buf[pos : pos + 8], "little")
    date, time = divmod(value, 1_000_000)
    year, month_day = divmod(date, 10000)
    if month_day // 100 > 12 or month_day % 100 > 31:
        raise ValueDecodeError(f"old DATETIME value {value} is out of range")
    month, day = divmod(month_day, 100)
    hour, minute_second = divmod(time, 10000)
    return make_datetime(year, month, day, hour, *divmod(minute_second, 100), 0, 0)


def encode_datetime_old(value: dt.datetime | ZeroDate) -> bytes:
    year, month, day, hour, minute, second, micro = _fields(value)
    if micro:
        raise ValueError("the old DATETIME format has no fractional seconds")
    number = ((year * 100 + month) * 100 + day) * 1_000_000 + hour * 10000 + minute * 100
    return (number + second).to_bytes(8, "little")


def decode_time_old(buf: bytes, pos: int) -> dt.timedelta:
    """The old TIME: a signed 3-byte integer (-)HHMMSS."""
    value = int.from_bytes(buf[pos : pos + 3], "little", signed=True)
    hour, minute_second = divmod(abs(value), 10000)
    minute, second = divmod(minute_second, 100)
    if minute > 59 or second > 59:
        raise ValueDecodeError(f"old TIME value {value} is out of range")
    total = (hour * 3600 + minute * 60 + second) * _MICRO
    return dt.timedelta(microseconds=-total if value < 0 else total)


def encode_time_old(value: dt.timedelta) -> bytes:
    negative, hour, minute, second, micro = _time_parts(value)
    if micro:
        raise ValueError("the old TIME format has no fractional seconds")
    number = hour * 10000 + minute * 100 + second
    return (-number if negative else number).to_bytes(3, "little", signed=True)


def decode_timestamp_old(buf: bytes, pos: int) -> dt.datetime | ZeroDate:
    """The old TIMESTAMP: 4 bytes of seconds since the epoch, little-endian."""
    seconds = int.from_bytes(buf[pos : pos + 4], "little")
    if seconds == 0:
        return ZeroDate(0, 0, 0)
    return dt.datetime.fromtimestamp(seconds, UTC)


def encode_timestamp_old(value: dt.datetime | ZeroDate) -> bytes:
    seconds, micro = _epoch_seconds(value)
    if micro:
        raise ValueError("the old TIMESTAMP format has no fractional seconds")
    return seconds.to_bytes(4, "little")
