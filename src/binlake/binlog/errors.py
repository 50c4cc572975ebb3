"""The root of binlake's error tree and the errors of the binlog format.

The root lives here, in the innermost package, so that pure format code can raise typed errors
without importing anything outside ``binlake.binlog``; ``binlake.errors`` re-exports it and adds
the errors of the outer layers.

Every error carries a one-line ``hint`` and whatever structured fields apply: ``file``,
``offset`` (byte offset of the event or problem in that file), ``event_type`` (the name
mariadb-binlog prints) and ``table`` (``db.table``).
"""

from __future__ import annotations

import inspect
from typing import Any, ClassVar, Self


class BinlakeError(Exception):
    """Base of every error binlake raises on purpose.

    A subclass declares its structured fields once, as annotated class attributes with their
    defaults (``code: int | None = None``), and writes no ``__init__``: the constructor takes
    them as keyword arguments (an undeclared one is a ``TypeError``), and ``fields()`` reports
    them with those of every class above it.
    """

    default_hint: ClassVar[str] = "see the message above"
    #: The CLI's exit status for the error (sysexits.h; 70: EX_SOFTWARE). A class whose branch
    #: exits differently declares its own; its subclasses inherit it unless they declare theirs.
    exit_code: ClassVar[int] = 70
    #: Whether waiting and trying again may cure it (a lost connection, a catalog outage); the
    #: caller decides whether it waits, for the branches it handles.
    retryable: ClassVar[bool] = False
    #: The structured fields the class itself declares (set from its annotations).
    extra_fields: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        annotations = inspect.get_annotations(cls)
        cls.extra_fields = tuple(
            name for name, kind in annotations.items() if not _is_class_var(kind)
        )

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        file: str | None = None,
        offset: int | None = None,
        event_type: str | None = None,
        table: str | None = None,
        **fields: Any,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.offset = offset
        self.event_type = event_type
        self.table = table
        declared = self.declared_fields()
        for name, value in fields.items():
            if name not in declared:
                raise TypeError(f"{type(self).__name__} has no field {name!r}")
            setattr(self, name, value)
        self.hint = hint if hint is not None else self._default_hint()

    @classmethod
    def declared_fields(cls) -> tuple[str, ...]:
        """The fields the class and the classes above it declare (the base's four aside)."""
        names: list[str] = []
        for klass in reversed(cls.__mro__):
            names += vars(klass).get("extra_fields", ())
        return tuple(dict.fromkeys(names))

    def _default_hint(self) -> str:
        """The hint when the raiser gives none (a subclass may use its fields)."""
        return self.default_hint

    def with_location(self, *, file: str | None = None, offset: int | None = None) -> Self:
        """Fill in location fields the raiser could not know (pure code knows no file name)."""
        if file is not None and self.file is None:
            self.file = file
        if offset is not None and self.offset is None:
            self.offset = offset
        return self

    def fields(self) -> dict[str, Any]:
        """The structured fields that are set, for logs and JSON output."""
        out: dict[str, Any] = {"error": type(self).__name__, "message": self.message}
        names = ["file", "offset", "event_type", "table", *self.declared_fields()]
        for name in dict.fromkeys(names):
            value = getattr(self, name, None)
            if value is not None:
                out[name] = value
        out["hint"] = self.hint
        return out

    def __str__(self) -> str:
        where = []
        if self.file is not None:
            where.append(self.file)
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        if self.event_type is not None:
            where.append(self.event_type)
        if self.table is not None:
            where.append(f"table {self.table}")
        prefix = f"{', '.join(where)}: " if where else ""
        return f"{prefix}{self.message}"


def _is_class_var(annotation: object) -> bool:
    text = annotation if isinstance(annotation, str) else repr(annotation)
    return text.startswith(("ClassVar", "typing.ClassVar"))


class BinlogFormatError(BinlakeError):
    """Bytes that are not a valid binlog: a reader must stop here, never skip."""

    exit_code = 65
    default_hint = "the file is damaged or not a binlog; `binlake binlog verify FILE` shows where"


class NotABinlogError(BinlogFormatError):
    """The file does not start with the binlog magic or a format description."""

    default_hint = "pass a binlog v4 file (it starts with the bytes fe 62 69 6e)"


class TruncatedEventError(BinlogFormatError):
    """An event header or body ends before its declared length (a torn write at a tail)."""

    default_hint = "a crash left a partial event; `binlake binlog recover DIR` trims it"


class InvalidEventError(BinlogFormatError):
    """An event whose header or body is impossible (bad length, bad field)."""


class OrphanEventError(BinlogFormatError):
    """An event that closes a transaction (XID, COMMIT, XA PREPARE) where none is open."""

    default_hint = (
        "the log's transactions are not whole: a file was cut or spliced; "
        "restore it from a copy or re-fetch it from the source"
    )


class ChecksumMismatchError(BinlogFormatError):
    """The CRC32 stored in an event does not match its bytes."""

    default_hint = (
        "the event's bytes changed after they were written; a mismatch at the tail of the newest "
        "file is a torn write (`binlake binlog recover`), anywhere else it is corruption"
    )


class UnsupportedTypeError(BinlakeError):
    """A column type or event feature binlake cannot represent exactly."""

    exit_code = 65
    default_hint = "this column type is not supported; exclude the table in [tables] exclude"


class ValueDecodeError(BinlogFormatError):
    """A column value that cannot be decoded exactly (e.g. bytes invalid in the column charset)."""

    default_hint = (
        "the stored bytes do not match the column's declared type or charset; "
        "check the source column definition"
    )
