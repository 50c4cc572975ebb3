"""What one Spark task runs for one chunk of a table, on an executor: read the chunk from the
source, write it as one Parquet data file of the Iceberg table, and report it.

``run_chunk`` connects (``ChunkSource``: PyMySQL's handshake, auth plugins and TLS; the password
is read on the executor from ``password_env`` or ``password_file``, never carried in the task),
sets the session up for exact values (``character_set_results = binary``: text arrives in its
column's own charset; ``time_zone = '+00:00'``: TIMESTAMP in UTC; a long ``net_write_timeout``:
the server must not give up while the task writes a row group), runs the chunk's SELECT through
``result_set.TextResultReader`` and decodes each received block column by column (``decode``)
into Arrow record batches, which ``chunk_files`` writes.

The SELECT of a keyed table's chunk is a plain autocommit statement over its key range: InnoDB
reads it from one read view, so every row is a committed value; the copy's exactness does not
need the read's binlog position (``binlake.snapshot.copier``). A table without a key is one
chunk read in its own consistent snapshot, whose position the task reports (``positions``).

The result's column definitions are checked against those the copy was planned with (name,
type, charset, length, decimals, signedness): a table altered since the plan gives an error
record (``SnapshotShapeChangedError``) instead of values under the wrong type.

What the driver learns of a chunk is one JSON record (``ChunkRecord``). Errors that another
attempt cannot cure (the shape changed, the table is gone, a value that cannot be decoded, a
refused login) are returned in the record, so that Spark does not retry them; any other error
(a lost connection, ``KILL QUERY``, the source restarting) fails the task, and Spark runs it
again (``spark.task.maxFailures``; ``local[N,4]`` in local mode); its text carries the error's
fields (``encode_error``) so that the driver can raise it typed once the attempts are spent.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

import pyarrow as pa
import pymysql

from binlake import errors as error_tree
from binlake.config import SourceConfig
from binlake.config.secrets import text_bytes, without_trailing_newline
from binlake.errors import (
    BinlakeError,
    SnapshotError,
    SnapshotShapeChangedError,
    SourceAuthError,
    SourceError,
)
from binlake.snapshot.cells import locate
from binlake.snapshot.chunk_files import FileTarget, write_chunk_file
from binlake.snapshot.columns import CopyColumn, quote, select_expression
from binlake.snapshot.decode import ZeroDates, decoder
from binlake.snapshot.positions import Flavor, run_statement, task_position
from binlake.snapshot.result_set import ColumnPacket, TextResultReader
from binlake.source.errmap import map_pymysql_error
from binlake.source.settings import ConnectionSettings, connection_settings, open_connection

#: MySQL column-definition flag: UNSIGNED.
UNSIGNED_FLAG: Final = 32
#: ER_NO_SUCH_TABLE, ER_BAD_DB_ERROR: the table (or its database) is gone.
GONE_CODES: Final = frozenset({1146, 1049})
#: Marks the encoded error in the text of a failed task (the driver finds it in Spark's error).
ERROR_MARK: Final = "<<binlake-chunk-error>>"
#: Errors no other attempt can cure: reported in the record, not retried by Spark.
_FINAL_ERRORS: Final = (
    error_tree.SnapshotShapeChangedError,
    error_tree.ValueDecodeError,
    error_tree.ApplyError,
    error_tree.UnsupportedTypeError,
    error_tree.SourceAuthError,
    error_tree.ConfigError,
)
#: Session settings of a chunk read (see the module docstring).
SESSION = (
    "SET SESSION character_set_results = binary, time_zone = '+00:00', "
    "net_write_timeout = 3600, net_read_timeout = 3600"
)
ColumnShape = tuple[str, int, int, int, int, bool]


@dataclass(frozen=True, slots=True)
class ChunkSource:
    """How a task reaches the source: the connection settings without the password, and where
    the executor reads it (``password_env``, ``password_file``)."""

    settings: ConnectionSettings
    password_env: str | None = None
    password_file: str | None = None
    #: How long a task keeps trying to connect (the source restarting, a full connection table).
    connect_window_s: float = 60.0

    def password(self) -> bytes:
        """The password as the driver sends it (``binlake.config.secrets``: an environment
        value's UTF-8 bytes, a file's bytes less one trailing newline), read here, on the
        executor."""
        if self.password_env is not None:
            value = os.environ.get(self.password_env)
            if value is None:
                raise error_tree.ConfigError(
                    f"the executor has no environment variable {self.password_env} "
                    "([source] password_env)",
                    field="source.password_env",
                    hint="set it in the environment of every Spark worker (spark-env.sh), or "
                    "use password_file with the file present on every executor host",
                )
            return text_bytes(value)
        if self.password_file is not None:
            try:
                with open(self.password_file, "rb") as file:
                    return without_trailing_newline(file.read())
            except OSError as exc:
                raise error_tree.ConfigError(
                    f"the executor cannot read password_file {self.password_file}: {exc}",
                    field="source.password_file",
                    hint="put the file on every executor host, readable by the Spark worker",
                ) from None
        return b""

    def connect(self) -> Any:
        """A connection for one chunk (retried with backoff while the source is unreachable,
        up to ``connect_window_s``; ``open_connection``: the TLS context PyMySQL prepares is
        built once per executor process, not at every chunk)."""
        settings = replace(self.settings, password=self.password())
        deadline = time.monotonic() + self.connect_window_s
        wait = 0.2
        while True:
            try:
                return open_connection(settings)
            except (pymysql.err.MySQLError, RuntimeError, OSError) as exc:
                error = map_pymysql_error(exc, settings, during="connect")
            if isinstance(error, SourceAuthError) or time.monotonic() + wait > deadline:
                raise error
            time.sleep(wait)
            wait = min(wait * 2, 5.0)


def chunk_source(config: SourceConfig) -> ChunkSource:
    """The ``ChunkSource`` of ``[source]``: its connection settings with the password left out
    (tasks are pickled, and Spark may log or spill them), and where executors read it."""
    settings = replace(connection_settings(config), password=b"")
    password_file = None if config.password_file is None else str(config.password_file)
    return ChunkSource(settings, config.password_env, password_file)


@dataclass(frozen=True, slots=True)
class KeyRange:
    """``lower <= key < upper`` on the chunk column; None: unbounded on that side."""

    lower: Any = None
    upper: Any = None


@dataclass(frozen=True, slots=True)
class ChunkPlan:
    """Everything a task needs for its chunk (small: it is pickled into every task)."""

    database: str
    table: str
    columns: tuple[CopyColumn, ...]
    #: The column the ranges bound ("" only for a table without one: read whole, one range
    #: unbounded both ways). A resumed copy's one remaining range still has its lower bound.
    key: str
    ranges: tuple[KeyRange, ...]
    #: The result's column definitions when the copy was planned (``column_shape``).
    shape: tuple[ColumnShape, ...]
    files: FileTarget
    flavor: Flavor = "mariadb"
    #: Read the chunk in its own consistent snapshot and report its position (a table
    #: without a key: one chunk, at its own position).
    positioned: bool = False
    #: The lake table is a change log: each row also gets ``_binlake_op`` = ``insert``, the
    #: chunk's position and its sequence number there (``binlake.lake.schema.evolution``).
    changelog: bool = False

    def __post_init__(self) -> None:
        bounded = any(r.lower is not None or r.upper is not None for r in self.ranges)
        if bounded and not self.key:  # its SELECT would read the whole table, not the range
            raise SnapshotError(
                f"{self.name}: a chunk plan bounds its key ranges on no column",
                table=self.name,
                hint="report this binlake bug; the copy's committed chunks are intact",
            )

    @property
    def name(self) -> str:
        return f"{self.database}.{self.table}"


@dataclass
class ChunkRecord:
    """What a task reports of its chunk (JSON: ``to_json`` / ``from_json``)."""

    chunk: int
    path: str | None = None
    rows: int = 0
    bytes: int = 0
    zero_dates: dict[str, int] = field(default_factory=dict)
    position: str | None = None
    #: An error no retry cures (``encode_error``'s fields), instead of a file.
    error: dict[str, Any] | None = None

    def to_json(self) -> str:
        return json.dumps(
            {
                "chunk": self.chunk,
                "path": self.path,
                "rows": self.rows,
                "bytes": self.bytes,
                "zero_dates": self.zero_dates,
                "position": self.position,
                "error": self.error,
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> ChunkRecord:
        data = json.loads(text)
        return cls(
            chunk=int(data["chunk"]),
            path=data.get("path"),
            rows=int(data.get("rows", 0)),
            bytes=int(data.get("bytes", 0)),
            zero_dates={str(k): int(v) for k, v in (data.get("zero_dates") or {}).items()},
            position=data.get("position"),
            error=data.get("error"),
        )


# ---- the task --------------------------------------------------------------------------------


def run_chunk(
    source: ChunkSource, plan: ChunkPlan, index: int, attempt: str, connection: Any = None
) -> str:
    """Chunk ``index`` of ``plan`` read and written as one Parquet file (``attempt`` makes its
    name unique); its ``ChunkRecord`` as JSON. Raises (for Spark to retry) on errors another
    attempt may cure, their fields encoded in the message. ``connection``: one the task reads
    several chunks on (a group of small tables), else a new one for this chunk."""
    record = ChunkRecord(index)
    zero: ZeroDates = Counter()
    try:
        own = connection is None
        reading = source.connect() if own else connection
        try:
            batches = _read(reading, plan, index, zero, record)
            path, size, rows = write_chunk_file(plan.files, index, attempt, batches)
        finally:
            if own:
                reading.close()
    except _FINAL_ERRORS as error:
        record.error = encode_error(error)
        return record.to_json()
    except SourceError as error:
        if error.code in GONE_CODES:
            record.error = encode_error(error)
            return record.to_json()
        raise RuntimeError(ERROR_MARK + json.dumps(encode_error(error)) + ERROR_MARK) from None
    except BinlakeError as error:
        raise RuntimeError(ERROR_MARK + json.dumps(encode_error(error)) + ERROR_MARK) from None
    record.path, record.bytes, record.rows = path, size, rows
    record.zero_dates = dict(zero)
    return record.to_json()


def _read(
    connection: Any, plan: ChunkPlan, index: int, zero: ZeroDates, record: ChunkRecord
) -> Iterator[pa.RecordBatch]:
    """The chunk's rows as record batches (a generator: the file writer pulls them)."""
    where = f"{plan.name} on {connection.host}:{connection.port}"
    run_statement(connection, SESSION, where)
    if plan.positioned:
        record.position = task_position(connection, plan.flavor, plan.database, plan.table)
    reader = TextResultReader(connection, where=where)
    columns, blocks = reader.query(chunk_query(plan, index, connection.escape))
    check_shape(plan, columns)
    decoders = [decoder(c) for c in plan.columns]
    names = [c.name for c in plan.columns]
    count = len(plan.columns)
    seq = 0
    for block in blocks:
        cells = locate(block, count)
        arrays = [decode(c, zero) for decode, c in zip(decoders, cells, strict=True)]
        if plan.changelog:
            arrays += changelog_arrays(block.rows, record.position or "", seq)
            seq += block.rows
        extra = CHANGELOG_NAMES[: len(arrays) - count]
        yield pa.RecordBatch.from_arrays(arrays, names=names + extra)
    if plan.positioned:  # the lock or snapshot ends with the connection anyway
        run_statement(connection, "UNLOCK TABLES" if plan.flavor == "mysql" else "COMMIT", where)


#: The change-log columns a copied row gets (``binlake.lake.schema.evolution.CHANGELOG_COLUMNS``).
CHANGELOG_NAMES: Final = ["_binlake_op", "_binlake_position", "_binlake_seq"]


def changelog_arrays(rows: int, position: str, first: int) -> list[pa.Array]:
    """``_binlake_op``, ``_binlake_position`` and ``_binlake_seq`` of ``rows`` copied rows."""
    return [
        pa.array(["insert"] * rows, pa.string()),
        pa.array([position] * rows, pa.string()),
        pa.array(range(first, first + rows), pa.int64()),
    ]


def chunk_query(plan: ChunkPlan, index: int, escape: Any) -> str:
    """The SELECT of chunk ``index``: its key range, no ORDER BY (an append needs no order)."""
    select = ", ".join(select_expression(c) for c in plan.columns)
    sql = f"SELECT {select} FROM {quote(plan.database)}.{quote(plan.table)}"
    if not plan.key:
        return sql
    bounds = plan.ranges[index]
    terms = []
    if bounds.lower is not None:
        terms.append(f"{quote(plan.key)} >= {escape(bounds.lower)}")
    if bounds.upper is not None:
        terms.append(f"{quote(plan.key)} < {escape(bounds.upper)}")
    return sql + (" WHERE " + " AND ".join(terms) if terms else "")


def column_shape(column: ColumnPacket) -> ColumnShape:
    """What of a result column must not change during a copy."""
    return (
        column.name,
        column.type_code,
        column.charset,
        column.length,
        column.decimals,
        bool(column.flags & UNSIGNED_FLAG),
    )


def check_shape(plan: ChunkPlan, columns: Sequence[ColumnPacket]) -> None:
    shape = tuple(column_shape(c) for c in columns)
    if shape != plan.shape:
        changed = [
            f"{old[0]} -> {new[0]}" if old[0] != new[0] else old[0]
            for old, new in zip(plan.shape, shape, strict=False)
            if old != new
        ]
        raise SnapshotShapeChangedError(
            f"{plan.name} changed shape since its copy was planned "
            f"({len(plan.shape)} -> {len(shape)} columns; changed: {', '.join(changed) or '-'})",
            table=plan.name,
        )


# ---- errors across the task boundary -----------------------------------------------------


def encode_error(error: BinlakeError) -> dict[str, Any]:
    """A binlake error's class and fields, as JSON-able data."""
    return {k: v for k, v in error.fields().items() if _plain(v)}


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def decode_error(data: dict[str, Any]) -> BinlakeError:
    """The typed error ``encode_error`` described (a ``SourceError`` if its class is not one
    of ``binlake.errors``)."""
    name = str(data.get("error", ""))
    cls = getattr(error_tree, name, None)
    if not (isinstance(cls, type) and issubclass(cls, BinlakeError)):
        cls = SourceError
    base = {k: data.get(k) for k in ("hint", "file", "offset", "event_type", "table")}
    fields = {k: data[k] for k in cls.declared_fields() if k in data}
    return cls(str(data.get("message", "a chunk task failed")), **base, **fields)


def error_in_text(text: str) -> BinlakeError | None:
    """The last error a failed task encoded in ``text`` (Spark's error message), if any."""
    end = text.rfind(ERROR_MARK)
    start = text.rfind(ERROR_MARK, 0, end)
    if start < 0 or end <= start:
        return None
    try:
        return decode_error(json.loads(text[start + len(ERROR_MARK) : end]))
    except (ValueError, TypeError):
        return None
