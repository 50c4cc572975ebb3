"""Dates and times of DEFAULT values: literals read as MariaDB reads them, and the statement's
time as the rows a table already has got it (pure, but for ``SourceClock``).

What MariaDB 10.11 stores for existing rows when a column is added (measured on the sandbox,
``ALTER TABLE t ADD c ... DEFAULT ...`` on a table with rows):

* ``CURRENT_TIMESTAMP`` / ``NOW()`` / ``LOCALTIMESTAMP`` (with or without ``(n)``): the
  statement's start time, the QUERY event's header timestamp (seconds) plus MariaDB's
  high-resolution status variable ``Q_HRNOW`` (microseconds; MySQL's ``Q_MICROSECONDS``), cut
  (never rounded, also under ``TIME_ROUND_FRACTIONAL``) to the *column's* fractional digits,
  whatever the function's: ``TIMESTAMP(6) DEFAULT CURRENT_TIMESTAMP`` keeps all six digits,
  ``DATETIME(3) DEFAULT NOW(6)`` keeps three. A TIMESTAMP column holds that instant (UTC); a
  DATETIME or DATE column holds it in the session's time zone (the event's ``time_zone`` status
  variable: an offset ``+05:00`` is applied here, ``SYSTEM`` or a named zone is converted by the
  source server itself, ``SourceClock``). ``Q_HRNOW`` is only logged when the server used the
  fraction: a column with fractional digits and no fraction logged is refused, never guessed.
* a literal: its fraction beyond the column's digits is cut, or rounded when the session's
  ``sql_mode`` has ``TIME_ROUND_FRACTIONAL``; a TIMESTAMP literal is a local time of the
  session's time zone; zero dates (``0000-00-00``, a zero month or day) are null in the lake.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol

from binlake.binlog.source_facts import ZoneTimes

__all__ = [
    "MODE_TIME_ROUND_FRACTIONAL",
    "ZERO",
    "RecordedClock",
    "SourceClock",
    "StatementTime",
    "TemporalError",
    "parse_date",
    "parse_datetime",
    "parse_time",
]

MODE_TIME_ROUND_FRACTIONAL = 1 << 34
_OFFSET = re.compile(r"^([+-])(\d{1,2}):(\d{2})$")
_DELIMITED = re.compile(
    r"^\s*(\d{1,4})[-/.:](\d{1,2})[-/.:](\d{1,2})"
    r"(?:[ T]+(\d{1,2})[:.](\d{1,2})(?:[:.](\d{1,2})(?:\.(\d*))?)?)?\s*$"
)
_COMPACT = re.compile(r"^\s*(\d{6}|\d{8}|\d{12}|\d{14})(?:\.(\d*))?\s*$")
_TIME = re.compile(r"^\s*(-)?\s*(?:(\d+)\s+)?(\d+):(\d{1,2})(?::(\d{1,2}))?(?:\.(\d*))?\s*$")
_TIME_DIGITS = re.compile(r"^\s*(-)?(\d{1,7})(?:\.(\d*))?\s*$")
_TIME_MAX_US = (838 * 3600 + 59 * 60 + 59) * 1_000_000 + 999_999
_US = 1_000_000
#: Microseconds of the last digit kept, by fractional digits 0..6.
_UNITS = (1_000_000, 100_000, 10_000, 1_000, 100, 10, 1)


class TemporalError(ValueError):
    """A date or time MariaDB would not have stored as binlake reads it (the caller names the
    table and the statement)."""


class _Zero:
    """A zero date: null in the lake."""

    def __repr__(self) -> str:
        return "ZERO"


ZERO = _Zero()


class SourceClock(Protocol):
    """The source server's own time zone conversions, for ``SYSTEM`` and named zones."""

    def local_time(self, zone: str, seconds: int, microseconds: int) -> dt.datetime:
        """The naive local time of the UTC instant ``seconds.microseconds`` in ``zone``."""
        ...

    def utc_instant(self, zone: str, local: dt.datetime) -> tuple[int, int]:
        """(seconds, microseconds) since the epoch of the local time ``local`` in ``zone``."""
        ...


class RecordedClock:
    """A ``SourceClock`` that answers from the conversions the receiver recorded in the relay
    log with the statement (``ZoneTimes``, binlog/source_facts.py) and asks ``fallback`` (the
    live source) only what they lack; without a fallback that is a ``TemporalError``."""

    def __init__(self, recorded: ZoneTimes, fallback: SourceClock | None = None) -> None:
        self.recorded = recorded
        self.fallback = fallback

    def local_time(self, zone: str, seconds: int, microseconds: int) -> dt.datetime:
        local = self.recorded.local_times.get(seconds) if zone == self.recorded.zone else None
        if local is not None:
            return local + dt.timedelta(microseconds=microseconds)
        return self._fallback(zone).local_time(zone, seconds, microseconds)

    def utc_instant(self, zone: str, local: dt.datetime) -> tuple[int, int]:
        instant = self.recorded.instants.get(local) if zone == self.recorded.zone else None
        if instant is not None:
            return instant
        return self._fallback(zone).utc_instant(zone, local)

    def _fallback(self, zone: str) -> SourceClock:
        if self.fallback is None:
            raise TemporalError(f"the relay log recorded no such conversion in time zone {zone}")
        return self.fallback


@dataclass(frozen=True, slots=True)
class StatementTime:
    """When the source ran the statement, and in which time zone."""

    seconds: int
    #: ``Q_HRNOW`` / ``Q_MICROSECONDS``; None when the event has neither.
    microseconds: int | None
    #: The session's ``time_zone`` as logged; None when the event has none.
    zone: str | None

    def instant(self, fsp: int) -> tuple[int, int]:
        """(seconds, microseconds cut to ``fsp`` digits) of the statement's start."""
        if self.microseconds is None:
            if fsp:
                raise TemporalError(
                    "the event has no fractional seconds of the statement's time (no Q_HRNOW)"
                )
            return self.seconds, 0
        return self.seconds, _cut(self.microseconds, fsp)

    def utc(self, fsp: int) -> dt.datetime:
        seconds, micro = self.instant(fsp)
        return dt.datetime.fromtimestamp(seconds, dt.UTC) + dt.timedelta(microseconds=micro)

    def local(self, fsp: int, clock: SourceClock | None) -> dt.datetime:
        """The statement's start as a local time of the session's time zone."""
        seconds, micro = self.instant(fsp)
        offset = self._offset()
        if offset is not None:
            utc = dt.datetime.fromtimestamp(seconds, dt.UTC).replace(tzinfo=None)
            return utc + offset + dt.timedelta(microseconds=micro)
        return self._clock(clock).local_time(self._zone(), seconds, micro)

    def to_utc(self, local: dt.datetime, clock: SourceClock | None) -> dt.datetime:
        """The instant of a local time of the session's time zone (a TIMESTAMP literal)."""
        offset = self._offset()
        if offset is not None:
            return (local - offset).replace(tzinfo=dt.UTC)
        seconds, micro = self._clock(clock).utc_instant(self._zone(), local)
        return dt.datetime.fromtimestamp(seconds, dt.UTC) + dt.timedelta(microseconds=micro)

    def _zone(self) -> str:
        if self.zone is None:
            raise TemporalError("the event does not say the session's time zone")
        return self.zone

    def _offset(self) -> dt.timedelta | None:
        match = _OFFSET.match(self._zone().strip())
        if match is None:
            return None
        sign = -1 if match[1] == "-" else 1
        return sign * dt.timedelta(hours=int(match[2]), minutes=int(match[3]))

    def _clock(self, clock: SourceClock | None) -> SourceClock:
        if clock is None:
            raise TemporalError(f"time zone {self._zone()} needs the source server to convert")
        return clock


def _cut(microseconds: int, fsp: int) -> int:
    unit = _UNITS[fsp]
    return microseconds - microseconds % unit


def _fraction(digits: str | None, fsp: int, sql_mode: int) -> int:
    """Microseconds of a fraction as written, reduced to ``fsp`` digits (may be 1_000_000
    when rounding carries into the seconds)."""
    digits = (digits or "")[:7].ljust(7, "0")
    value = Decimal(f"0.{digits}") * _US
    unit = _UNITS[fsp]
    if sql_mode & MODE_TIME_ROUND_FRACTIONAL:
        return int((value / unit).quantize(Decimal(1), "ROUND_HALF_UP")) * unit
    return int(value) - int(value) % unit


def _year(text: str) -> int:
    if len(text) == 2:
        year = int(text)
        return year + (2000 if year < 70 else 1900)
    if len(text) == 4:
        return int(text)
    raise TemporalError(f"year {text!r} is not two or four digits")


def _fields(text: str) -> tuple[int, int, int, int, int, int, str | None]:
    """Year, month, day, hour, minute, second and the fraction's digits of a date/datetime."""
    match = _DELIMITED.match(text)
    if match is not None:
        year, month, day, hour, minute, second, frac = match.groups()
        return (
            _year(year),
            int(month),
            int(day),
            int(hour or 0),
            int(minute or 0),
            int(second or 0),
            frac,
        )
    match = _COMPACT.match(text)
    if match is None:
        raise TemporalError(f"{text!r} is not a date or datetime binlake reads")
    digits, frac = match.groups()
    year_digits = 4 if len(digits) in (8, 14) else 2
    year, rest = _year(digits[:year_digits]), digits[year_digits:]
    parts = [int(rest[i : i + 2]) for i in range(0, len(rest), 2)] + [0, 0, 0]
    return year, parts[0], parts[1], parts[2], parts[3], parts[4], frac


def parse_datetime(text: str, fsp: int, sql_mode: int = 0) -> dt.datetime | _Zero:
    """A DATETIME literal for a column of ``fsp`` digits."""
    year, month, day, hour, minute, second, frac = _fields(text)
    if month == 0 or day == 0:
        if (hour, minute, second) != (0, 0, 0) or int(frac or "0"):
            raise TemporalError(f"{text!r}: a zero date with a time")
        return ZERO
    micro = _fraction(frac, fsp, sql_mode)
    try:
        value = dt.datetime(year, month, day, hour, minute, second)
    except ValueError as error:
        raise TemporalError(f"{text!r}: {error}") from None
    return value + dt.timedelta(microseconds=micro)


def parse_date(text: str) -> dt.date | _Zero:
    """A DATE literal (a time part, which MariaDB drops with a note, is dropped)."""
    year, month, day, *_ = _fields(text)
    if month == 0 or day == 0:
        return ZERO
    try:
        return dt.date(year, month, day)
    except ValueError as error:
        raise TemporalError(f"{text!r}: {error}") from None


def parse_time(text: str, fsp: int, sql_mode: int = 0) -> int:
    """A TIME literal as the lake holds it: microseconds (negative allowed)."""
    match = _TIME.match(text)
    if match is not None:
        sign, days, hours, minutes, seconds, frac = match.groups()
        hour_count = int(days or 0) * 24 + int(hours)
    else:
        digits_match = _TIME_DIGITS.match(text)
        if digits_match is None:
            raise TemporalError(f"{text!r} is not a time binlake reads")
        sign, digits, frac = digits_match.groups()
        digits = digits.rjust(6, "0")
        hour_count, minutes, seconds = int(digits[:-4]), digits[-4:-2], digits[-2:]
    if int(minutes) > 59 or int(seconds or 0) > 59:
        raise TemporalError(f"{text!r}: minutes or seconds over 59")
    total = hour_count * 3600 + int(minutes) * 60 + int(seconds or 0)
    micro = total * _US + _fraction(frac, fsp, sql_mode)
    if micro > _TIME_MAX_US:
        raise TemporalError(f"{text!r} is outside TIME's range")
    return -micro if sign else micro
