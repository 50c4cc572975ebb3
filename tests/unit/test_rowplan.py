"""The plans of the C row decoder (binlake.binlog.rowplan): which columns C decodes itself and
which it hands to their Python decoder; and the decoder's own checks of plans and bytes. That it
gives the generated decoder's values and errors is tests/property/test_rows_roundtrip.py's."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest

from binlake.binlog import rowplan
from binlake.binlog.constants import ColumnType as T
from binlake.binlog.encodings.charsets import CHARSET_CODECS, charmap_table
from binlake.binlog.rowcodec import DECODE_FAILURES
from binlake.binlog.rowplan import NATIVE, column_op, native_rows_decoder
from binlake.binlog.values import ABSENT, ColumnSpec, value_decoder

needs_native = pytest.mark.skipif(
    NATIVE is None, reason="the C row decoder is not loaded (pure Python run or no current build)"
)


def spec(kind: int, metadata: int = 0, length: int = 0, **fields: Any) -> ColumnSpec:
    return ColumnSpec(0, "c", "db.t", kind, metadata, length, **fields)


def layout(*columns: ColumnSpec) -> list[ColumnSpec]:
    """The columns as the columns 0, 1, ... of a table."""
    return [replace(column, index=i, name=f"c{i}") for i, column in enumerate(columns)]


NATIVE_COLUMNS = {
    "int": (spec(T.LONG), rowplan.OP_INT),
    "double": (spec(T.DOUBLE), rowplan.OP_FLOAT),
    "utf8 varchar": (spec(T.VARCHAR, 80, 80, codec="utf-8"), rowplan.OP_TEXT),
    "latin1 varchar": (spec(T.VARCHAR, 80, 80, codec="binlake_latin1"), rowplan.OP_TEXT),
    "gbk text": (spec(T.BLOB, 2, 2, codec="gbk"), rowplan.OP_TEXT),
    "binary(4)": (spec(T.STRING, 0, 4), rowplan.OP_BYTES),
    "blob": (spec(T.BLOB, 2, 2), rowplan.OP_BYTES),
    "decimal": (spec(T.NEWDECIMAL, 12 << 8 | 2), rowplan.OP_DECIMAL),
    "year": (spec(T.YEAR), rowplan.OP_YEAR),
    "bit": (spec(T.BIT, 0, 12), rowplan.OP_BIT),
    "enum": (spec(T.ENUM, 0, 1, labels=("a",)), rowplan.OP_ENUM),
    "set": (spec(T.SET, 0, 1, labels=("a", "b")), rowplan.OP_SET),
    "date": (spec(T.DATE), rowplan.OP_DATE),
    "datetime2": (spec(T.DATETIME2, 3), rowplan.OP_DATETIME2),
    "timestamp2": (spec(T.TIMESTAMP2, 6), rowplan.OP_TIMESTAMP2),
    "time2": (spec(T.TIME2, 2), rowplan.OP_TIME2),
}
PYTHON_COLUMNS = {
    "old datetime": spec(T.DATETIME),
    "old time": spec(T.TIME),
    "old timestamp": spec(T.TIMESTAMP),
    "json": spec(T.JSON, 4, 4),
    "geometry": spec(T.GEOMETRY, 4, 4),
    "uuid": spec(T.STRING, 0, 16, hint="uuid"),
}


@pytest.mark.parametrize("name", NATIVE_COLUMNS)
def test_the_common_column_types_are_decoded_in_c(name: str) -> None:
    column, op = NATIVE_COLUMNS[name]
    assert column_op(column)[0] == op


@pytest.mark.parametrize("name", PYTHON_COLUMNS)
def test_other_column_types_carry_their_python_decoder(name: str) -> None:
    column = PYTHON_COLUMNS[name]
    assert column_op(column) == (rowplan.OP_PYTHON, 0, 0, 0, value_decoder(column))


def test_text_is_decoded_by_utf_8_a_single_byte_charsets_table_or_its_codecs_name() -> None:
    def how(codec: str) -> tuple[int, object]:
        op = column_op(spec(T.VARCHAR, 80, 80, codec=codec))
        return op[3], op[4]

    assert how("utf-8") == (rowplan.TEXT_UTF8, "utf-8")
    assert how("binlake_latin1") == (rowplan.TEXT_CHARMAP, charmap_table("binlake_latin1"))
    assert how("gbk") == (rowplan.TEXT_CODEC, "gbk")


SINGLE_BYTE = sorted(
    codec for codec in CHARSET_CODECS.values() if codec and charmap_table(codec) is not None
)


@needs_native
@pytest.mark.parametrize("codec", SINGLE_BYTE)
def test_every_byte_of_a_single_byte_charset_decodes_as_its_codec_decodes_it(codec: str) -> None:
    decoder = native_rows_decoder("write", [spec(T.VARCHAR, 80, 80, codec=codec)], [], 1)
    assert decoder is not None
    for byte in range(256):
        image = bytes((0, 1, byte))
        try:
            expected: object = bytes((byte,)).decode(codec)
        except UnicodeDecodeError:
            expected = UnicodeDecodeError
        out: list[Any] = []
        try:
            decoder(image, len(image), out)
        except UnicodeDecodeError:
            out = [(None, (UnicodeDecodeError,))]
        assert out == [(None, (expected,))], f"byte {byte:#x}"


def test_a_binary_column_is_padded_back_to_its_length_and_a_varbinary_is_not() -> None:
    assert column_op(spec(T.STRING, 0, 4))[2:4] == (1, 4)
    assert column_op(spec(T.VARCHAR, 300, 300))[2:4] == (2, 0)


@needs_native
def test_the_extension_knows_every_op_of_the_plans() -> None:
    assert NATIVE is not None and NATIVE.OP_COUNT == rowplan.OP_COUNT


@needs_native
def test_a_plan_with_an_unknown_op_or_column_is_refused() -> None:
    assert NATIVE is not None
    with pytest.raises(ValueError, match="unknown op or column"):
        NATIVE.RowsDecoder(((rowplan.OP_COUNT, 0, 0, 0, None),), (), "write", 1, ABSENT)
    with pytest.raises(ValueError, match="unknown op or column"):
        NATIVE.RowsDecoder(((rowplan.OP_INT, 1, 4, 0, None),), (), "write", 1, ABSENT)


@needs_native
def test_a_layout_the_c_decoder_refuses_is_left_to_the_generated_decoder() -> None:
    """A damaged table map can give sizes the C reads are not written for (a BLOB of no length
    prefix): the extension refuses the plan, and the layout is decoded, or refused with its
    typed error, by the generated decoder, as in a pure run."""
    assert NATIVE is not None
    columns = layout(spec(T.BLOB, 0, 0))
    with pytest.raises(ValueError, match="sizes"):
        NATIVE.RowsDecoder(rowplan.image_plan(columns), (), "write", 1, ABSENT)
    assert native_rows_decoder("write", columns, columns, 1) is None


@needs_native
def test_a_value_cut_short_by_the_rows_data_is_a_decode_failure() -> None:
    columns = layout(spec(T.LONG), spec(T.VARCHAR, 80, 80, codec="utf-8"))
    decoder = native_rows_decoder("write", columns, columns, 2)
    assert decoder is not None
    whole = b"\x00" + (7).to_bytes(4, "little") + b"\x03h\xc3\xa9"
    out: list[Any] = []
    assert decoder(whole, len(whole), out) == len(whole)
    assert out == [(None, (7, "hé"))]
    for cut in range(1, len(whole)):
        with pytest.raises(DECODE_FAILURES):
            decoder(whole[:cut], cut, [])


@needs_native
def test_odd_temporal_and_decimal_values_go_through_the_python_helpers() -> None:
    columns = layout(spec(T.DATE), spec(T.TIMESTAMP2, 0), spec(T.NEWDECIMAL, 5 << 8 | 2))
    decoder = native_rows_decoder("delete", columns, columns, 3)
    assert decoder is not None
    zero_decimal = bytes([0x80, 0, 0])  # DECIMAL(5,2) 0.00
    image = b"\x00" + bytes(3) + bytes(4) + zero_decimal
    out: list[Any] = []
    decoder(image, len(image), out)
    ((before, after),) = out
    assert after is None
    assert [str(v) for v in before] == ["0000-00-00", "0000-00-00 00:00:00", "0.00"]
    assert isinstance(before[2], Decimal) and not isinstance(before[0], dt.date)


@needs_native
def test_a_decoder_is_initialised_once() -> None:
    """Decoders are cached and shared: one changed under another thread's call would be read
    while its plan is freed."""
    assert NATIVE is not None
    decoder = NATIVE.RowsDecoder(((rowplan.OP_INT, 0, 4, 0, None),), (), "write", 1, ABSENT)
    with pytest.raises(TypeError, match="initialised once"):
        decoder.__init__((), (), "write", 1, ABSENT)
    row = (5).to_bytes(4, "little")
    out: list[Any] = []
    assert decoder(b"\x00" + row, 5, out) == 5 and out == [(None, (5,))]
