"""Relay-log checkpoint (MDEV-181): where recovery starts scanning, and what purge may remove.

Per relay file the tracker counts the transactions appended to it that are not yet durable in
every table they touch. The *checkpoint* is the oldest file whose count is not zero, or the
newest file when every count is zero. Everything before the checkpoint is durable in every
table, so recovery scans from the checkpoint and purge may remove only files strictly older.

* Rotation never waits: ``on_file_added`` appends the new file whatever the counts are.
* Durability may finish out of order (file N-1 before N-2): the checkpoint then stays at N-2
  and jumps over N-1 in one step when N-2 reaches zero.
* The checkpoint only moves forward. It is recorded durably each time it moves (and only then),
  before the call that moved it returns; the record costs two fsyncs (the file and its folder)
  at most once per relay file, never per transaction.

The counts live in memory only. After a crash they are rebuilt, never trusted from disk:
recovery reads the recorded checkpoint (``scan_start``), scans the relay log from it, counts
the transactions some table has not made durable yet (from each table's applied position), and
constructs a new tracker with those counts. The recorded checkpoint is a lower bound of the
true one: it is written only after the counts say every transaction before it is durable, and
it never moves back, so a record that lags (a crash between computing and recording, a failed
write) only makes recovery scan more, never less. Purge works from the *recorded* checkpoint,
so it never removes a file a recovery would need.

What "durable in every table" needs from the lake: an optional ``before_record`` callback runs
just before each record is written; the applier passes the embedded warehouse's fsync
(``binlake.storage.warehouse_sync``), so the Iceberg files of the commits the new checkpoint
moves past are on disk before the record (and purge) moves past their relay files.

Record: a small text file replaced atomically (``atomic_replace``: temp file, fsync, rename,
folder fsync), one line ``binlake-checkpoint 1 <relay file name> <crc32 as 8 hex digits>``.
It is not kept in the shadow-page state file because the checkpoint is a single fact with a
single writer and no other participant: two-phase commit buys nothing, the atomic rename gives
old-or-new by itself, an operator can read it, and the shadow file stays the receiver's. A
missing record means "scan from the first relay file in the index" (safe). A malformed record
is a typed error, never guessed at.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from binlake.crashpoints import crash_point
from binlake.errors import CheckpointError, CheckpointRecordError
from binlake.storage.durable import atomic_replace

RECORD_TAG = "binlake-checkpoint"
RECORD_VERSION = 1
FSYNC_PURPOSE = "checkpoint"


def _check_name(file: str) -> str:
    if not file or file in (".", "..") or any(ch.isspace() or ch == "/" for ch in file):
        raise ValueError(f"{file!r} is not a relay file name (no folders, no whitespace)")
    if not file.isprintable():
        raise ValueError(f"{file!r} is not a relay file name (control characters)")
    return file


def encode_record(file: str) -> bytes:
    body = f"{RECORD_TAG} {RECORD_VERSION} {_check_name(file)}"
    return f"{body} {zlib.crc32(body.encode()):08x}\n".encode()


def decode_record(raw: bytes) -> str:
    """The relay file name a checkpoint record names; ``CheckpointRecordError`` if malformed."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointRecordError(f"not text (byte {exc.start} is invalid UTF-8)") from exc
    parts = text.removesuffix("\n").split(" ")
    if not text.endswith("\n") or len(parts) != 4 or parts[0] != RECORD_TAG:
        raise CheckpointRecordError(f"not a checkpoint record: {text[:80]!r}")
    tag, version, file, crc = parts
    if version != str(RECORD_VERSION):
        raise CheckpointRecordError(
            f"checkpoint record version {version}, this binlake reads {RECORD_VERSION}"
        )
    if f"{zlib.crc32(f'{tag} {version} {file}'.encode()):08x}" != crc:
        raise CheckpointRecordError(f"checkpoint record fails its CRC32 ({text[:80]!r})")
    try:
        return _check_name(file)
    except ValueError as exc:
        raise CheckpointRecordError(str(exc)) from None


class CheckpointRecord:
    """The durable record of the checkpoint: one small file, replaced atomically."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def read(self) -> str | None:
        """The recorded checkpoint file name, or None when nothing was recorded yet."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self._unreadable(exc) from exc
        try:
            return decode_record(raw)
        except CheckpointRecordError as error:
            raise error.with_location(file=str(self.path)) from None

    def written_ns(self) -> int | None:
        """When the record was last written (its mtime, ns), None when nothing was recorded."""
        try:
            return self.path.stat().st_mtime_ns
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self._unreadable(exc) from exc

    def _unreadable(self, exc: OSError) -> CheckpointRecordError:
        return CheckpointRecordError(
            f"cannot read the checkpoint record: {exc.strerror}",
            file=str(self.path),
            hint="check the state folder's permissions",
        )

    def write(self, file: str) -> None:
        """Record ``file`` as the checkpoint: old or new record after any crash, never a mix."""
        data = encode_record(file)
        crash_point("checkpoint_before_record")
        atomic_replace(self.path, data, FSYNC_PURPOSE)


def scan_start(record: CheckpointRecord, files: Sequence[str]) -> str:
    """The relay file recovery scans from: the recorded checkpoint, else the first file."""
    if not files:
        raise CheckpointError("the relay index lists no file", file=str(record.path))
    recorded = record.read()
    if recorded is None:
        return files[0]
    if recorded not in files:
        raise CheckpointError(
            f"the recorded checkpoint {recorded} is not in the relay index",
            file=str(record.path),
            hint=(
                "the relay log lost files recovery needs; the receiver must refetch from the "
                "applied positions (binlake recovery), then the checkpoint is recorded anew"
            ),
        )
    return recorded


class CheckpointTracker:
    """Per relay file, the count of transactions not yet durable in every table (MDEV-181).

    ``files`` are the relay files in index order (names as the index lists them); ``pending``
    the counts rebuilt by recovery (files not named have zero). Construction records the
    checkpoint at once if the counts show it has moved past the record. ``before_record`` runs
    just before each new record is written (the warehouse fsync); if it raises, nothing is
    recorded and the error propagates (the record lags: recovery scans more, never less).
    """

    def __init__(
        self,
        record: CheckpointRecord,
        files: Sequence[str],
        pending: Mapping[str, int] | None = None,
        *,
        before_record: Callable[[], None] | None = None,
    ) -> None:
        if len(set(files)) != len(files):
            raise CheckpointError("the relay index lists a file twice", file=str(record.path))
        self._record = record
        self._before_record = before_record
        self._recorded = scan_start(record, files)
        self._files = [_check_name(file) for file in files]
        self._pending = dict.fromkeys(self._files, 0)
        for file, count in (pending or {}).items():
            self._check_rebuilt_count(file, count)
            self._pending[file] = count
        self._advance()

    @property
    def files(self) -> tuple[str, ...]:
        """The relay files tracked, oldest first."""
        return tuple(self._files)

    @property
    def checkpoint(self) -> str:
        """The oldest file with transactions not durable everywhere, else the newest file."""
        return self._files[self._checkpoint_index()]

    @property
    def recorded_checkpoint(self) -> str:
        """The checkpoint as durably recorded: a lower bound of ``checkpoint`` (equal unless a
        record write failed)."""
        return self._recorded

    def pending(self, file: str) -> int:
        """Transactions of ``file`` not yet durable in every table they touch."""
        return self._pending[self._known(file)]

    def on_file_added(self, file: str) -> None:
        """Rotation: ``file`` is the new newest relay file. Never waits for any count."""
        if file in self._pending:
            raise CheckpointError(f"relay file {file} is already tracked")
        self._files.append(_check_name(file))
        self._pending[file] = 0
        self._advance()

    def on_transaction_appended(self, file: str) -> None:
        """One more transaction of ``file`` is waiting to become durable in its tables."""
        if self._files.index(self._known(file)) < self._checkpoint_index():
            raise CheckpointError(
                f"a transaction was appended to {file}, older than the checkpoint "
                f"{self.checkpoint}; transactions go to the newest relay file"
            )
        self._pending[file] += 1

    def on_transactions_durable(self, file: str, n: int) -> None:
        """``n`` transactions of ``file`` are now durable in every table they touch (the applier
        calls this once per committed batch and file). Records the checkpoint if it moved."""
        if n < 0:
            raise ValueError(f"a negative number of transactions ({n}) became durable")
        count = self._pending[self._known(file)]
        if n > count:
            raise CheckpointError(
                f"{n} transactions of {file} reported durable, but only {count} are pending"
            )
        self._pending[file] = count - n
        self._advance()

    def purgeable(self) -> list[str]:
        """The files purge may remove: strictly older than the recorded checkpoint."""
        return self._files[: self._files.index(self._recorded)]

    def on_files_purged(self, files: Iterable[str]) -> None:
        """Forget files purge removed; each must be strictly older than the recorded checkpoint."""
        allowed = set(self.purgeable())
        for file in files:
            if file not in allowed:
                raise CheckpointError(
                    f"relay file {file} was purged but is not older than the recorded "
                    f"checkpoint {self._recorded}"
                )
            self._files.remove(file)
            del self._pending[file]
            allowed.discard(file)

    def _checkpoint_index(self) -> int:
        for index, file in enumerate(self._files):
            if self._pending[file]:
                return index
        return len(self._files) - 1

    def _advance(self) -> None:
        """Record the checkpoint when it has moved forward past the record (only then)."""
        new = self.checkpoint
        if self._files.index(new) > self._files.index(self._recorded):
            if self._before_record is not None:
                self._before_record()
            self._record.write(new)
            self._recorded = new

    def _known(self, file: str) -> str:
        if file not in self._pending:
            raise CheckpointError(f"relay file {file} is not tracked (not in the relay index)")
        return file

    def _check_rebuilt_count(self, file: str, count: int) -> None:
        self._known(file)
        if count < 0:
            raise ValueError(f"negative pending count {count} for {file}")
        if count and self._files.index(file) < self._files.index(self._recorded):
            raise CheckpointError(
                f"recovery counted {count} pending transactions in {file}, older than the "
                f"recorded checkpoint {self._recorded}: the record would not be a lower bound",
                file=str(self._record.path),
                hint="rebuild the counts by scanning from scan_start(), not from an older file",
            )
