"""Date and time column values: binlog bytes <-> ``datetime`` objects, exactly.

The MySQL 5.6 formats (DATETIME2, TIMESTAMP2, TIME2; what MariaDB 10.11 and MySQL write) are
big-endian with an offset for the sign and 0-3 bytes of fractional seconds; the old formats
(DATETIME, TIME, TIMESTAMP, DATE/NEWDATE) are little-endian integers. Zero and partly zero dates
('0000-00-00', '2020-00-15') and dates that are not real calendar days (ALLOW_INVALID_DATES) come
back as ``ZeroDate``, never guessed into a real date. Fields no server can store (minute 61,
month 14) raise ``ValueDecodeError``.

Decoders take ``(buf, pos, fsp)`` and read ``binary_size`` bytes; encoders return those bytes.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

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


def _unsigned_frac(buf: bytes, pos: int, fsp: int) -> int:
    size = _FRAC_BYTES[fsp]
    if size == 0:
        return 0
    value = int.from_bytes(buf[pos : pos + size], "big") * _FRAC_SCALE[fsp]
    if value >= _MICRO:
        raise ValueDecodeError(f"fractional seconds {value} are not below one second")
    return value


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


def decode_datetime2(buf: bytes, pos: int, fsp: int) -> dt.datetime | ZeroDate:
    """DATETIME(fsp) in the 5.6 format: a naive datetime (or ZeroDate)."""
    _check_fsp(fsp)
    packed = int.from_bytes(buf[pos : pos + 5], "big") - DATETIMEF_INT_OFS
    if packed < 0:
        raise ValueDecodeError("negative DATETIME value")
    ymd, hms = packed >> 17, packed & 0x1FFFF
    ym = ymd >> 5
    micro = _unsigned_frac(buf, pos + 5, fsp)
    return make_datetime(
        ym // 13, ym % 13, ymd & 31, hms >> 12, hms >> 6 & 63, hms & 63, micro, fsp
    )


def encode_datetime2(value: dt.datetime | ZeroDate, fsp: int) -> bytes:
    year, month, day, hour, minute, second, micro = _fields(value)
    ymd = (year * 13 + month) << 5 | day
    packed = ymd << 17 | hour << 12 | minute << 6 | second
    return (packed + DATETIMEF_INT_OFS).to_bytes(5, "big") + _frac_bytes(micro, fsp)


# ---- TIMESTAMP2 -----------------------------------------------------------------------------


def timestamp2_size(fsp: int) -> int:
    return 4 + _FRAC_BYTES[fsp]


def decode_timestamp2(buf: bytes, pos: int, fsp: int) -> dt.datetime | ZeroDate:
    """TIMESTAMP(fsp) in the 5.6 format: an aware UTC datetime, or ZeroDate for 0."""
    _check_fsp(fsp)
    seconds = int.from_bytes(buf[pos : pos + 4], "big")
    micro = _unsigned_frac(buf, pos + 4, fsp)
    if seconds == 0 and micro == 0:
        return ZeroDate(0, 0, 0, fsp=fsp)
    return dt.datetime.fromtimestamp(seconds, UTC).replace(microsecond=micro)


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
    frac = -micro if negative else micro  # C's remainder keeps the sign of the dividend
    stored = int(frac / _FRAC_SCALE[fsp]) & ((1 << (8 * size)) - 1)
    return intpart.to_bytes(3, "big") + stored.to_bytes(size, "big")


# ---- the old formats ------------------------------------------------------------------------


def decode_date(buf: bytes, pos: int) -> dt.date | ZeroDate:
    """DATE / NEWDATE: 3 bytes, ``year << 9 | month << 5 | day``."""
    value = int.from_bytes(buf[pos : pos + 3], "little")
    return make_date(value >> 9, value >> 5 & 15, value & 31)


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
