"""The cells of a block of text-protocol rows, located column by column with numpy.

A text-protocol row is its cells one after the other, each a length-encoded string: one byte
``< 0xFB`` is the length, ``0xFB`` is NULL, ``0xFC``/``0xFD``/``0xFE`` are followed by a 2-, 3-
or 8-byte length. Rows are framed already (``result_set.RowBlock``), so cell ``j`` of every
row is found at once from cell ``j - 1``'s end: a handful of numpy operations per column,
whatever the row count. The last column must end exactly where each packet ends: a free check
of the framing.

``as_binary_view`` hands a column's cells to Arrow without copying them: an Arrow
``binary_view`` array whose views point into the block's bytes (values of up to 12 bytes are
inlined in the view, as the format requires). Arrow's own casts then parse numbers and validate
UTF-8 in C++.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from numpy.lib.stride_tricks import sliding_window_view

from binlake.errors import SourceProtocolError
from binlake.snapshot.result_set import NATIVE, PADDING, RowBlock

NULL_MARK: Final = 0xFB
#: 0xFC, 0xFD, 0xFE: a 2-, 3- or 8-byte length follows.
_LONG_LENGTHS: Final = ((0xFC, 2), (0xFD, 3), (0xFE, 8))
_INLINE: Final = 12
_INLINE_RANGE: Final = np.arange(_INLINE, dtype=np.int64)

Ints = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class Cells:
    """One column of a block: where each row's value starts, its length, whether it is NULL."""

    data: npt.NDArray[np.uint8]
    starts: Ints
    lengths: Ints
    nulls: Mask

    @property
    def rows(self) -> int:
        return len(self.starts)

    def validity(self) -> pa.Buffer | None:
        """Arrow's validity bitmap (None: no NULLs)."""
        if not self.nulls.any():
            return None
        return pa.py_buffer(np.packbits(~self.nulls, bitorder="little"))

    def fixed(self, width: int) -> npt.NDArray[np.uint8]:
        """The first ``width`` bytes (<= PADDING) of every cell as an (rows, width) matrix
        (NULL cells give the block's first bytes: mask them)."""
        if width > PADDING:
            raise ValueError(f"cells are gathered {PADDING} bytes wide at most")
        window = sliding_window_view(self.data, width)
        return window[self.starts]

    def value(self, row: int) -> bytes | None:
        """One cell as bytes (the per-value slow path)."""
        if self.nulls[row]:
            return None
        start = int(self.starts[row])
        return self.data[start : start + int(self.lengths[row])].tobytes()


def locate(block: RowBlock, columns: int) -> list[Cells]:
    """The cells of each of ``columns`` columns in every row of ``block``."""
    data = block.data
    pos = block.starts
    out = []
    try:
        for _ in range(columns):
            first = data[pos]
            lengths = first.astype(np.int64)
            header = np.ones(len(pos), dtype=np.int64)
            nulls = first == NULL_MARK
            if (first >= NULL_MARK).any():
                lengths[nulls] = 0
                for mark, size in _LONG_LENGTHS:
                    _long_lengths(data, pos, first == mark, size, lengths, header)
                if (first == 0xFF).any():
                    raise SourceProtocolError("a cell starts with 0xFF")
            starts = pos + header
            pos = starts + lengths
            # a NULL cell points at byte 0: gathers over every row never run off the block
            out.append(Cells(data, np.where(nulls, 0, starts), lengths, nulls))
    except IndexError:
        raise SourceProtocolError("a cell runs past the end of its block") from None
    if not np.array_equal(pos, block.ends):
        raise SourceProtocolError(f"the {columns} cells of a row do not fill its packet")
    return out


def _long_lengths(
    data: npt.NDArray[np.uint8], pos: Ints, mask: Mask, size: int, lengths: Ints, header: Ints
) -> None:
    rows = np.nonzero(mask)[0]
    if not len(rows):
        return
    at = pos[rows] + 1
    value = np.zeros(len(rows), dtype=np.int64)
    for k in range(size):
        value |= data[at + k].astype(np.int64) << (8 * k)
    lengths[rows] = value
    header[rows] = 1 + size


def as_binary_view(cells: Cells) -> pa.Array:
    """The cells as an Arrow ``binary_view`` array over the block's bytes (no copy of values);
    the views written in C when ``NATIVE`` is loaded, else by ``binary_views``."""
    if len(cells.lengths) and cells.lengths.max() >= 1 << 31:  # a view's length is 32 bits
        raise SourceProtocolError("a cell of 2 GiB or more")
    if NATIVE is None:
        views = binary_views(cells)
    else:
        try:
            views = NATIVE.views(cells.data, cells.starts, cells.lengths)
        except ValueError as error:
            raise SourceProtocolError(str(error)) from None
    buffers = [cells.validity(), pa.py_buffer(views), pa.py_buffer(cells.data)]
    return pa.Array.from_buffers(pa.binary_view(), cells.rows, buffers)


def binary_views(cells: Cells) -> npt.NDArray[np.uint8]:
    """The 16-byte Arrow views of the cells, with numpy (``_textcells.views``' reference):
    length, then the value inline (up to 12 bytes) or its 4-byte prefix, buffer 0, offset."""
    n = cells.rows
    lengths = cells.lengths
    views = np.zeros((n, 16), dtype=np.uint8)
    words = views.view(np.int32)
    words[:, 0] = lengths
    inline = cells.fixed(_INLINE)
    # a view's inline bytes past the value's length must be zero; NULLs are all zero
    inline = np.where(lengths[:, None] > _INLINE_RANGE, inline, 0)
    views[:, 4:16] = inline
    long = np.nonzero(lengths > _INLINE)[0]
    if len(long):  # (cells of 2 GiB or more are refused by the caller)
        words[long, 2] = 0  # buffer 0 (the prefix, bytes 4-7, is already in place)
        words[long, 3] = cells.starts[long]
    return views
