"""Positions (``binlake.position``): one order by (file sequence number, offset) whatever the
width of the number in the file name, and ``file:offset`` text that parses back to the same
position."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from binlake.position import (
    RelayPosition,
    SourcePosition,
    at_or_before,
    before,
    earliest,
    is_new_for,
    parse_position,
    sequence_number,
)

BASES = st.sampled_from(["mariadb-bin", "binlog", "relay-bin", "host-1.log"])
NUMBERS = st.integers(min_value=0, max_value=10**12)
WIDTHS = st.integers(min_value=6, max_value=14)
OFFSETS = st.integers(min_value=0, max_value=2**40)
KINDS = st.sampled_from([SourcePosition, RelayPosition])


@st.composite
def numbered(draw: st.DrawFn) -> tuple[int, int, str]:
    """(number, offset, file name): the number zero-padded to any width (and wider than it
    when it needs more digits, as servers do past 999999)."""
    number, width = draw(NUMBERS), draw(WIDTHS)
    return number, draw(OFFSETS), f"{draw(BASES)}.{number:0{width}d}"


@given(KINDS, numbered(), numbered())
def test_the_order_is_file_number_then_offset_for_any_width(
    kind: type[SourcePosition] | type[RelayPosition],
    a: tuple[int, int, str],
    b: tuple[int, int, str],
) -> None:
    (number_a, offset_a, file_a), (number_b, offset_b, file_b) = a, b
    pa, pb = kind(file_a, offset_a), kind(file_b, offset_b)
    assert sequence_number(file_a) == number_a
    if (number_a, offset_a) != (number_b, offset_b):
        assert before(pa, pb) == ((number_a, offset_a) < (number_b, offset_b))
        assert at_or_before(pa, pb) == ((number_a, offset_a) < (number_b, offset_b))
        assert before(pa, pb) != before(pb, pa)
    else:
        assert at_or_before(pa, pb) or at_or_before(pb, pa)
    assert not before(pa, pa) and at_or_before(pa, pa)


@given(st.lists(numbered(), min_size=1, max_size=20))
def test_sorting_by_key_sorts_by_number_then_offset(items: list[tuple[int, int, str]]) -> None:
    positions = [SourcePosition(file, offset) for _, offset, file in items]
    ordered = sorted(positions, key=lambda p: p.key())
    numbers = [(sequence_number(p.file), p.offset) for p in ordered]
    assert numbers == sorted(numbers)
    first = earliest(positions)
    assert (sequence_number(first.file), first.offset) == min((n, o) for n, o, _ in items)


@given(numbered(), numbered())
def test_a_transaction_is_new_for_a_table_exactly_when_it_is_after_the_applied_position(
    t: tuple[int, int, str], applied: tuple[int, int, str]
) -> None:
    position, at = SourcePosition(t[2], t[1]), SourcePosition(applied[2], applied[1])
    assert is_new_for(position, at) == before(at, position)
    assert is_new_for(position, None)
    assert not before(position, None) and before(None, position)


@given(KINDS, st.text(min_size=1), OFFSETS)
def test_text_parses_back_to_the_same_position(
    kind: type[SourcePosition] | type[RelayPosition], file: str, offset: int
) -> None:
    position = kind(file, offset)
    assert str(position) == f"{file}:{offset}"
    assert kind.parse(str(position)) == position
    if kind is SourcePosition:
        assert parse_position(str(position)) == position


@given(st.text())
def test_text_without_an_offset_is_refused(text: str) -> None:
    file, sep, offset = text.rpartition(":")
    if sep and file and offset.isascii() and offset.isdigit():
        assert parse_position(text) == SourcePosition(file, int(offset))
        return
    try:
        parse_position(text)
    except ValueError:
        return
    raise AssertionError(f"{text!r} parsed")
