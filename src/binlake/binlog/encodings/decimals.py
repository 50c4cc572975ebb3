"""NEWDECIMAL values: MySQL's binary decimal format <-> ``decimal.Decimal``, exactly.

A DECIMAL(p, s) value is stored big-endian in groups of 9 decimal digits (4 bytes each); the
integer part's leading digits that do not fill a group, and the fraction's trailing ones, take
1-4 bytes. The first bit is inverted as the sign (set for non-negative); negative values have
every byte inverted as well.

``decimal_source`` emits the Python statements that decode one value; the row decoder inlines
them and ``decode_decimal`` runs the same statements, so both paths share one implementation.
Values are built from their digit string, so no ``decimal`` context (precision 28 by default)
ever rounds a DECIMAL(65, 30).
"""

from __future__ import annotations

from decimal import Decimal
from functools import lru_cache
from typing import Any

from binlake.binlog.errors import ValueDecodeError

DIG_PER_GROUP = 9
_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
#: The largest precision a server declares (MariaDB and MySQL: 65).
MAX_PRECISION = 65


@lru_cache(maxsize=256)
def decimal_groups(precision: int, scale: int) -> tuple[tuple[int, int, bool], ...]:
    """The layout: (bytes, digits, is_integer_part) per group, most significant first."""
    if not (0 < precision <= MAX_PRECISION and 0 <= scale <= precision):
        raise ValueDecodeError(f"DECIMAL({precision},{scale}) is not a valid declaration")
    intg, frac = precision - scale, scale
    groups: list[tuple[int, int, bool]] = []
    if intg % DIG_PER_GROUP:
        groups.append((_DIG2BYTES[intg % DIG_PER_GROUP], intg % DIG_PER_GROUP, True))
    groups += [(4, DIG_PER_GROUP, True)] * (intg // DIG_PER_GROUP)
    groups += [(4, DIG_PER_GROUP, False)] * (frac // DIG_PER_GROUP)
    if frac % DIG_PER_GROUP:
        groups.append((_DIG2BYTES[frac % DIG_PER_GROUP], frac % DIG_PER_GROUP, False))
    return tuple(groups)


def decimal_size(precision: int, scale: int) -> int:
    """Bytes a DECIMAL(precision, scale) value takes."""
    return sum(nbytes for nbytes, _, _ in decimal_groups(precision, scale))


def decimal_source(precision: int, scale: int, target: str) -> list[str]:
    """Statements that read one value at ``b[p:]`` into ``target`` and advance ``p``.

    They use the names ``_Decimal`` and ``_bad_decimal`` (see ``DECIMAL_NAMESPACE``) and the
    scratch names ``_x``, ``_s`` and ``_g0``...
    """
    groups = decimal_groups(precision, scale)
    size = sum(nbytes for nbytes, _, _ in groups)
    sign = 1 << (8 * size - 1)
    lines = [
        f"_x = _from_bytes(b[p:p + {size}], 'big'); p += {size}",
        f"if _x & {sign:#x}: _x ^= {sign:#x}; _s = ''",
        f"else: _x ^= {sign - 1:#x}; _s = '-'",
    ]
    shift = 8 * size
    checks: list[str] = []
    number = ""
    for i, (nbytes, digits, _) in enumerate(groups):
        shift -= 8 * nbytes
        mask = (1 << (8 * nbytes)) - 1
        lines.append(f"_g{i} = _x >> {shift} & {mask:#x}" if shift else f"_g{i} = _x & {mask:#x}")
        checks.append(f"_g{i} >= {10**digits}")
        number = f"({number}) * {10**digits} + _g{i}" if number else f"_g{i}"
    lines.append(f"if {' or '.join(checks)}: _bad_decimal({precision}, {scale})")
    exponent = f"E-{scale}" if scale else ""
    lines.append(f"{target} = _Decimal(f'{{_s}}{{{number}}}{exponent}')")
    return lines


def _bad_decimal(precision: int, scale: int) -> None:
    raise ValueDecodeError(f"a DECIMAL({precision},{scale}) group holds more digits than it can")


DECIMAL_NAMESPACE: dict[str, Any] = {
    "_Decimal": Decimal,
    "_bad_decimal": _bad_decimal,
    "_from_bytes": int.from_bytes,
}


@lru_cache(maxsize=256)
def _decoder(precision: int, scale: int) -> Any:
    body = "\n    ".join(decimal_source(precision, scale, "v"))
    namespace = dict(DECIMAL_NAMESPACE)
    exec(f"def decode(b, p):\n    {body}\n    return v, p\n", namespace)
    return namespace["decode"]


def decode_decimal(buf: bytes, pos: int, precision: int, scale: int) -> tuple[Decimal, int]:
    """The DECIMAL(precision, scale) value at ``pos`` and the position after it."""
    value, end = _decoder(precision, scale)(buf, pos)
    if end > len(buf):
        raise ValueDecodeError(f"a DECIMAL({precision},{scale}) value runs past the buffer")
    return value, end


def encode_decimal(value: Decimal, precision: int, scale: int) -> bytes:
    """The binary form of ``value``; ValueError if it does not fit DECIMAL(precision, scale)."""
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise ValueError(f"{value} is not a finite number")
    number = int("".join(map(str, digits)) or "0")
    shift = exponent + scale
    if shift < 0:
        if number % 10**-shift:
            raise ValueError(f"{value} has more than {scale} fractional digits")
        number //= 10**-shift
    else:
        number *= 10**shift
    if number >= 10**precision:
        raise ValueError(f"{value} does not fit DECIMAL({precision},{scale})")
    groups = decimal_groups(precision, scale)
    int_value, frac_value = divmod(number, 10**scale)
    body = 0
    frac_digits = scale
    int_digits = precision - scale
    for nbytes, ndigits, is_int in groups:
        if is_int:
            int_digits -= ndigits
            group = int_value // 10**int_digits % 10**ndigits
        else:
            frac_digits -= ndigits
            group = frac_value // 10**frac_digits % 10**ndigits
        body = body << (8 * nbytes) | group
    size = sum(nbytes for nbytes, _, _ in groups)
    top = 1 << (8 * size - 1)
    raw = body ^ ((1 << (8 * size)) - 1) ^ top if sign else body ^ top
    return raw.to_bytes(size, "big")
