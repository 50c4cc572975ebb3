"""Shadow-page state file: small durable state updated by two-phase commit (WL#3970).

The file holds one small payload (the receiver's source identity, the applied position of a
target that cannot store it itself). It never overwrites its committed data: an update goes to
the *spare* page, and a one-byte pointer in the header says which page is committed.

Layout (little-endian; every region starts on a 4 KiB boundary)::

    offset 0      header region, 4096 bytes; only the first 28 are used:
                    0  8  magic  b"BLKSHADW"
                    8  2  version (1)
                   10  1  committed page (0 or 1)
                   11  1  reserved (0)
                   12  4  page size in bytes (a multiple of 4096)
                   16  8  prepared XID (0 = none)
                   24  4  CRC32 of bytes 0..23
    offset 4096   page 0, ``page_size`` bytes
    offset 4096 + page_size   page 1, ``page_size`` bytes
                  each page:
                    0  8  sequence number (the committed page's + 1 when prepared)
                    8  8  XID of the prepare that wrote it (0 only for the page ``create`` wrote)
                   16  4  payload length
                   20  4  CRC32 of bytes 0..19 and of the payload
                   24  .. payload, then zeros to the end of the page

Protocol (``fsync`` marks the durable steps; each update costs three fsyncs)::

    prepare(x, data): write the spare page (seq+1, x, data); fsync
                      write the header (same pointer, prepared XID = x); fsync
    commit(x):        write the header (pointer = spare, XID = 0); fsync
    rollback(x):      write the header (same pointer, XID = 0); fsync

The header write is the one designed in-place write; it is 28 bytes at offset 0, inside the first
sector on any device, so the device writes it as one sector. Regions are 4 KiB aligned so that a
torn write of one region can never damage another, even on 4 KiB-sector drives.

Why a torn header is survivable. Because prepare fsyncs the spare page *before* it writes the
header, at most one region is ever being written without an fsync behind it: either the spare
page (header durable) or the header (both pages durable). So:

* a torn spare page has a bad CRC and the durable header does not point to it, or names no
  prepared XID: it is ignored and the next prepare overwrites it;
* a torn header (bad CRC) can only come from an interrupted prepare, commit or rollback, and at
  each of those instants both pages are valid: the committed page (sequence S) and the page
  being prepared, committed or rolled back (sequence S + 1, carrying its XID). The lower page is
  therefore the committed state and the higher page is *prepared*, not committed: ``recover()``
  reports its XID and the coordinator commits or rolls it back, exactly as after any crash
  between prepare and commit. Taking the highest page as committed would be wrong: a header torn
  during prepare would commit data the coordinator may still roll back.

Anything else is damage a crash cannot cause, and it is refused with a typed error rather than
answered with older data: a damaged committed page under a valid header, or a bad header
without two valid consecutive pages (``StateFileCorruptError``). A damaged page under a valid
header that names a prepared XID is reported by ``recover()``; rolling it back is allowed,
committing it is an error. The unused bytes of the header region and the zeros after a payload
are outside every CRC and never read.

Callers must run ``recover()`` at start and resolve a reported XID (``commit`` or ``rollback``)
before relying on ``read()``: until then ``read()`` is the committed state *before* that XID.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from binlake.crashpoints import crash_point
from binlake.errors import (
    BinlakeError,
    NotAStateFileError,
    StateFileCorruptError,
    StateFileError,
    StatePayloadTooLargeError,
    XidMismatchError,
)
from binlake.storage.durable import atomic_replace, fsync_fd, raise_os_error

MAGIC = b"BLKSHADW"
VERSION = 1
#: Alignment of every region, and the smallest page size.
REGION = 4096
DEFAULT_PAGE_SIZE = REGION
MAX_PAGE_SIZE = 1 << 24
MAX_XID = (1 << 64) - 1

_HEADER = struct.Struct("<8sHBBIQ")
_CRC = struct.Struct("<I")
HEADER_SIZE = _HEADER.size + _CRC.size  # 28
_PAGE_HEAD = struct.Struct("<QQI")
PAGE_OVERHEAD = _PAGE_HEAD.size + _CRC.size  # 24
FSYNC_PURPOSE = "shadow"


@dataclass(frozen=True)
class Header:
    committed: int
    page_size: int
    prepared_xid: int

    def encode(self) -> bytes:
        body = _HEADER.pack(MAGIC, VERSION, self.committed, 0, self.page_size, self.prepared_xid)
        return body + _CRC.pack(zlib.crc32(body))


@dataclass(frozen=True)
class Page:
    sequence: int
    xid: int
    payload: bytes

    def encode(self, page_size: int) -> bytes:
        head = _PAGE_HEAD.pack(self.sequence, self.xid, len(self.payload))
        crc = _CRC.pack(zlib.crc32(self.payload, zlib.crc32(head)))
        raw = head + crc + self.payload
        return raw + bytes(page_size - len(raw))


def decode_header(raw: bytes) -> Header | None:
    """The header, or None when its CRC does not match (a torn or damaged header)."""
    if len(raw) < HEADER_SIZE:
        return None
    body = raw[: _HEADER.size]
    (crc,) = _CRC.unpack_from(raw, _HEADER.size)
    if zlib.crc32(body) != crc:
        return None
    magic, version, committed, _reserved, page_size, xid = _HEADER.unpack(body)
    if magic != MAGIC:
        raise NotAStateFileError(f"wrong magic {magic!r}", offset=0)
    if version != VERSION:
        raise NotAStateFileError(
            f"state file version {version}, this binlake reads version {VERSION}",
            offset=8,
            hint="open it with the binlake version that wrote it",
        )
    if committed not in (0, 1) or not _valid_page_size(page_size):
        raise StateFileCorruptError(
            f"header has a valid CRC but impossible fields (page {committed}, size {page_size})",
            offset=0,
        )
    return Header(committed, page_size, xid)


def decode_page(raw: bytes) -> Page | None:
    """The page, or None when its CRC does not match or its length is impossible."""
    sequence, xid, length = _PAGE_HEAD.unpack_from(raw)
    if length > len(raw) - PAGE_OVERHEAD:
        return None
    (crc,) = _CRC.unpack_from(raw, _PAGE_HEAD.size)
    payload = raw[PAGE_OVERHEAD : PAGE_OVERHEAD + length]
    if zlib.crc32(payload, zlib.crc32(raw[: _PAGE_HEAD.size])) != crc:
        return None
    return Page(sequence, xid, bytes(payload))


def _valid_page_size(page_size: int) -> bool:
    return REGION <= page_size <= MAX_PAGE_SIZE and page_size % REGION == 0


def page_offset(index: int, page_size: int) -> int:
    return REGION + index * page_size


def file_size(page_size: int) -> int:
    return REGION + 2 * page_size


@dataclass
class _ShadowState:
    """What the file says: the committed page and the prepared update, if any."""

    page_size: int
    committed: int
    committed_page: Page
    prepared_xid: int = 0
    #: The prepared page when it is readable (None when damaged: rollback only).
    prepared_page: Page | None = None
    #: True when the header failed its CRC and the state was rebuilt from the pages.
    header_recovered: bool = False


def load_state(raw: bytes) -> _ShadowState:
    """Decide the committed and prepared state from the file's bytes (see the module docstring)."""
    header = decode_header(raw[:HEADER_SIZE])
    if header is None:
        return _state_from_pages(raw)
    if len(raw) != file_size(header.page_size):
        raise StateFileCorruptError(
            f"file is {len(raw)} bytes; its header's page size {header.page_size} "
            f"needs {file_size(header.page_size)}",
            hint="the file was truncated or appended to; restore it from a backup",
        )
    pages = _pages(raw, header.page_size)
    committed_page = pages[header.committed]
    if committed_page is None:
        raise StateFileCorruptError(
            f"committed page {header.committed} fails its CRC32",
            offset=page_offset(header.committed, header.page_size),
        )
    state = _ShadowState(header.page_size, header.committed, committed_page)
    if header.prepared_xid:
        spare = pages[1 - header.committed]
        state.prepared_xid = header.prepared_xid
        if (
            spare is not None
            and spare.xid == header.prepared_xid
            and spare.sequence == committed_page.sequence + 1
        ):
            state.prepared_page = spare
    return state


def _pages(raw: bytes, page_size: int) -> tuple[Page | None, Page | None]:
    first = page_offset(0, page_size)
    second = page_offset(1, page_size)
    return (
        decode_page(raw[first : first + page_size]),
        decode_page(raw[second : second + page_size]),
    )


def _state_from_pages(raw: bytes) -> _ShadowState:
    """The torn-header fallback: two valid pages S and S+1 are committed S, prepared S+1."""
    foreign = raw[: len(MAGIC)] != MAGIC
    page_size, rest = divmod(len(raw) - REGION, 2)
    if rest or not _valid_page_size(page_size):
        if foreign:
            raise NotAStateFileError(f"wrong magic and a size ({len(raw)} bytes) no state has")
        raise StateFileCorruptError(f"header is damaged and the size ({len(raw)}) is impossible")
    pages = _pages(raw, page_size)
    first, second = pages
    if first is not None and second is not None and abs(first.sequence - second.sequence) == 1:
        low = 0 if first.sequence < second.sequence else 1
        high_page = pages[1 - low]
        low_page = pages[low]
        assert high_page is not None and low_page is not None
        if high_page.xid:
            return _ShadowState(page_size, low, low_page, high_page.xid, high_page, True)
    if foreign and first is None and second is None:
        raise NotAStateFileError("wrong magic and no valid page")
    raise StateFileCorruptError(
        "header fails its CRC32 and the pages do not show which one is committed "
        "(a torn header leaves two valid pages with consecutive sequence numbers)",
        offset=0,
    )


def _read_all(fd: int, path: Path) -> bytes:
    try:
        size = os.fstat(fd).st_size
        if size > file_size(MAX_PAGE_SIZE):
            raise NotAStateFileError(f"{size} bytes is larger than any state file")
        return os.pread(fd, size, 0)
    except OSError as exc:
        raise_os_error(exc, path, "reading the state file")


class ShadowStateFile:
    """One open state file. Not thread-safe; one process per state folder (see ``lock``)."""

    def __init__(self, path: Path, fd: int, state: _ShadowState, *, readonly: bool) -> None:
        self.path = path
        self._fd: int | None = fd
        self._state = state
        self._readonly = readonly
        self._failed = False

    @classmethod
    def create(
        cls, path: str | os.PathLike[str], page_size: int = DEFAULT_PAGE_SIZE, initial: bytes = b""
    ) -> ShadowStateFile:
        """Make a new state file whose committed payload is ``initial``; refuse to overwrite."""
        path = Path(path)
        if not _valid_page_size(page_size):
            raise ValueError(f"page size {page_size} is not a multiple of {REGION} in range")
        _check_capacity(path, initial, page_size)
        if path.exists():
            raise StateFileError(
                "a file already exists there",
                file=str(path),
                hint="open the existing state file, or choose another path",
            )
        image = bytearray(file_size(page_size))
        image[:HEADER_SIZE] = Header(0, page_size, 0).encode()
        start = page_offset(0, page_size)
        image[start : start + page_size] = Page(1, 0, initial).encode(page_size)
        atomic_replace(path, bytes(image), FSYNC_PURPOSE)
        return cls.open(path)

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, readonly: bool = False) -> ShadowStateFile:
        """Open and check a state file. Reads only; never repairs anything by itself."""
        path = Path(path)
        try:
            fd = os.open(path, (os.O_RDONLY if readonly else os.O_RDWR) | os.O_CLOEXEC)
        except OSError as exc:
            raise_os_error(exc, path, "opening the state file")
        try:
            state = load_state(_read_all(fd, path))
        except BinlakeError as error:
            os.close(fd)
            raise error.with_location(file=str(path)) from None
        return cls(path, fd, state, readonly=readonly)

    @property
    def capacity(self) -> int:
        """The largest payload a page holds."""
        return self._state.page_size - PAGE_OVERHEAD

    @property
    def page_size(self) -> int:
        return self._state.page_size

    @property
    def sequence(self) -> int:
        """The committed page's sequence number (1 after create, +1 per commit)."""
        return self._state.committed_page.sequence

    @property
    def header_recovered(self) -> bool:
        """True when the header was damaged (a torn write) and the state was read from pages."""
        return self._state.header_recovered

    def read(self) -> bytes:
        """The committed payload."""
        return self._state.committed_page.payload

    def recover(self) -> int | None:
        """The XID prepared and neither committed nor rolled back (left by a crash), or None."""
        return self._state.prepared_xid or None

    def prepare(self, xid: int, data: bytes) -> None:
        """Make ``data`` durable in the spare page and record ``xid`` as prepared."""
        fd = self._writable()
        if not 0 < xid <= MAX_XID:
            raise ValueError(f"XID {xid} is outside 1..2**64-1")
        state = self._state
        if state.prepared_xid:
            raise XidMismatchError(
                f"cannot prepare XID {xid}: XID {state.prepared_xid} is prepared",
                file=str(self.path),
                xid=xid,
                prepared_xid=state.prepared_xid,
            )
        _check_capacity(self.path, data, state.page_size)
        spare = 1 - state.committed
        page = Page(state.committed_page.sequence + 1, xid, bytes(data))
        with self._failing_on_error():
            self._write_at(page.encode(state.page_size), page_offset(spare, state.page_size))
            crash_point("shadow_after_spare_write")
            fsync_fd(fd, FSYNC_PURPOSE, self.path)
            self._write_at(Header(state.committed, state.page_size, xid).encode(), 0)
            fsync_fd(fd, FSYNC_PURPOSE, self.path)
        state.prepared_xid, state.prepared_page, state.header_recovered = xid, page, False
        crash_point("shadow_after_prepare")

    def commit(self, xid: int) -> None:
        """Make the page prepared under ``xid`` the committed one (commit_by_xid)."""
        fd = self._writable()
        state = self._state
        self._check_prepared(xid, "commit")
        if state.prepared_page is None:
            raise StateFileCorruptError(
                f"the page prepared under XID {xid} fails its CRC32; it cannot be committed",
                file=str(self.path),
                offset=page_offset(1 - state.committed, state.page_size),
                hint="roll the XID back and prepare the update again",
            )
        spare = 1 - state.committed
        with self._failing_on_error():
            self._write_at(Header(spare, state.page_size, 0).encode(), 0)
            crash_point("shadow_after_flip")
            fsync_fd(fd, FSYNC_PURPOSE, self.path)
        state.committed, state.committed_page = spare, state.prepared_page
        state.prepared_xid, state.prepared_page, state.header_recovered = 0, None, False

    def rollback(self, xid: int) -> None:
        """Forget the update prepared under ``xid``; the committed page stays (rollback_by_xid)."""
        fd = self._writable()
        state = self._state
        self._check_prepared(xid, "roll back")
        with self._failing_on_error():
            self._write_at(Header(state.committed, state.page_size, 0).encode(), 0)
            crash_point("shadow_after_rollback")
            fsync_fd(fd, FSYNC_PURPOSE, self.path)
        state.prepared_xid, state.prepared_page, state.header_recovered = 0, None, False

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _check_prepared(self, xid: int, action: str) -> None:
        prepared = self._state.prepared_xid
        if prepared != xid:
            what = f"XID {prepared} is prepared" if prepared else "no XID is prepared"
            raise XidMismatchError(
                f"cannot {action} XID {xid}: {what}",
                file=str(self.path),
                xid=xid,
                prepared_xid=prepared or None,
            )

    def _writable(self) -> int:
        if self._fd is None:
            raise StateFileError("the state file is closed", file=str(self.path))
        if self._readonly:
            raise StateFileError(
                "the state file was opened read-only", file=str(self.path), hint="open it writable"
            )
        if self._failed:
            raise StateFileError(
                "an earlier write or fsync of this state file failed; its state in memory "
                "may differ from the disk",
                file=str(self.path),
                hint="close and reopen the state file (reopening re-reads it), then recover()",
            )
        return self._fd

    @contextmanager
    def _failing_on_error(self) -> Iterator[None]:
        """Mark the file failed when a write or fsync raises: after a failed fsync the page
        cache may have dropped the write, so the only safe way on is to reopen and re-read."""
        try:
            yield
        except BaseException:
            self._failed = True
            raise

    def _write_at(self, data: bytes, offset: int) -> None:
        fd = self._writable()
        view = memoryview(data)
        try:
            while view:
                written = os.pwrite(fd, view, offset)
                view, offset = view[written:], offset + written
        except OSError as exc:
            raise_os_error(exc, self.path, "writing the state file")


def _check_capacity(path: Path, data: bytes, page_size: int) -> None:
    capacity = page_size - PAGE_OVERHEAD
    if len(data) > capacity:
        raise StatePayloadTooLargeError(
            f"payload of {len(data)} bytes does not fit a page ({capacity} bytes)",
            file=str(path),
            size=len(data),
            capacity=capacity,
        )
